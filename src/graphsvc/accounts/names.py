"""User names as people read them: the form two names are compared in, and the names refused
because they could pass for another's.

`name_key` is a name in NFKC, case-folded and trimmed: `ADMIN`, `admin ` and `admin` in
full-width letters (U+FF41...) all read as `admin`, so the store keeps one live user per key
(a unique index). What NFKC does not fold, `admin` with a Cyrillic `a` (U+0430), is refused
as a name that mixes scripts (UTS #39's "highly restrictive" level: one script, or Latin
with the scripts Chinese, Japanese and Korean names are written in). The standard library's
`unicodedata` has no script property, so the scripts come from `confusable_homoglyphs`'
table of Unicode's Scripts.txt. Invisible characters (format, control, unassigned) are
refused too.
"""

from __future__ import annotations

import unicodedata

from confusable_homoglyphs import categories

from graphsvc.errors import bad_request
from graphsvc.wire.accounts import MAX_NAME_LENGTH

# Scripts any name may hold besides its own: digits, punctuation, combining marks.
SHARED_SCRIPTS = frozenset({"COMMON", "INHERITED"})
# The mixes UTS #39 allows a "highly restrictive" identifier: the ways Japanese, Chinese and
# Korean are written, each with Latin.
SCRIPT_MIXES = (
    frozenset({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "HAN", "BOPOMOFO"}),
    frozenset({"LATIN", "HAN", "HANGUL"}),
)
# Control, format (zero-width and bidirectional marks), surrogate, private-use and
# unassigned characters, and the line and paragraph separators: a name holding one can look
# like a name without it.
INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def name_key(name: str) -> str:
    """The form user names are compared in. NFKC again after case folding, which can undo
    it (Unicode's NFKC_Casefold, as far as the standard library goes)."""
    folded = unicodedata.normalize("NFKC", name).casefold()
    return unicodedata.normalize("NFKC", folded).strip()


def check_user_name(name: str, field: str) -> str:
    """A new user name's key, once the name passes every rule; else a 400 naming `field`."""
    if not name.strip():
        raise bad_request("user name must not be empty", field)
    if name != name.strip():
        raise bad_request(f"{field} must not begin or end with white space", field)
    for character in name:
        if unicodedata.category(character) in INVISIBLE_CATEGORIES:
            raise bad_request(
                f"{field} must not hold invisible or control characters (U+{ord(character):04X})",
                field,
            )
    key = name_key(name)
    # NFKC can lengthen a name (U+FDFA is 18 characters), and the key is indexed too.
    if len(key) > MAX_NAME_LENGTH:
        raise bad_request(
            f"{field} must be at most {MAX_NAME_LENGTH} characters once normalized (NFKC)",
            field,
        )
    scripts: set[str] = {categories.alias(c) for c in unicodedata.normalize("NFKC", name)}
    scripts -= SHARED_SCRIPTS
    if len(scripts) > 1 and not any(scripts <= mix for mix in SCRIPT_MIXES):
        named = ", ".join(sorted(s.title() for s in scripts))
        raise bad_request(
            f"{field} mixes scripts ({named}): a name is written in one script (or Latin "
            "with Han, Kana, Hangul or Bopomofo), so that it cannot pass for another",
            field,
        )
    return key
