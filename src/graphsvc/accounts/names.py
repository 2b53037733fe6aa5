"""User names as people read them: the form two names are compared in, and the names refused
because they could pass for another's.

`name_key` is a name in NFKC, case-folded and trimmed: `ADMIN`, `admin ` and `admin` in
full-width letters (U+FF41...) all read as `admin`, so the store keeps one live user per key
(a unique index). What NFKC does not fold, `admin` with a Cyrillic `a` (U+0430), is refused
as a name that mixes scripts (UTS #39's "highly restrictive" level: one script, or Latin
with the scripts Chinese, Japanese and Korean names are written in). The standard library's
`unicodedata` has no script property, so the scripts come from `confusable_homoglyphs`'
table of Unicode's Scripts.txt. Invisible characters (format, control, unassigned) are
refused too, and so are the characters Unicode says to show as nothing (Default_Ignorable_
Code_Point: variation selectors, the Hangul fillers, U+034F), which hold no such category.

What one script can still fake, `admin` with a Latin alpha (U+0251), `ᴀce` (a small
capital), or a whole name in another script (`ace` in Cyrillic letters beside a Latin
`ace`), is caught by comparing names in UTS #39's confusable skeleton (`look_alike_forms`):
a new name (created, renamed) whose form is a live user's is a 409 naming that user
(accounts/users.py).
"""

from __future__ import annotations

import functools
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
# Default_Ignorable_Code_Point, from DerivedCoreProperties.txt of Unicode 16.0 (unchanged
# since 15.1), adjacent ranges merged: characters a renderer shows as nothing when it does
# not support them. Most are format characters (Cf, refused above); these ranges add the
# variation selectors (FE00-FE0F, E0100-E01EF, Mongolian 180B-180F), U+034F, the Hangul
# fillers (115F, 1160, 3164, FFA0), the Khmer inherent vowels (17B4, 17B5) and the
# unassigned rest of the property's blocks.
DEFAULT_IGNORABLE_RANGES = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
# A dot above a soft-dotted i or j shows as the letter's own dot: what `İ` case-folds to,
# and a dotless i (U+0131) with U+0307 once the skeleton makes it an i.
SOFT_DOT = "\u0307"
SOFT_DOTTED = frozenset("ij")


def default_ignorable(character: str) -> bool:
    code = ord(character)
    return any(low <= code <= high for low, high in DEFAULT_IGNORABLE_RANGES)


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
        if default_ignorable(character):
            raise bad_request(
                f"{field} must not hold characters shown as nothing (U+{ord(character):04X}, "
                "Unicode's default-ignorable code points)",
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


@functools.cache
def prototypes() -> dict[str, str]:
    """UTS #39's confusables table as character -> prototype, from the copy of Unicode's
    confusables.txt `confusable_homoglyphs` ships (confusables.json). That file keeps each
    line both ways (a source lists its prototype, a prototype its sources), so a character
    listing one other is a source of it, unless that other lists it alone too: then which
    was the prototype is lost, and the pair maps to one of the two (the same character
    either way, which is all a skeleton compared with another needs).

    Loaded on the first new name, not when the server starts: importing
    `confusable_homoglyphs.confusables` reads its 0.9 MB JSON, about 35 ms (40 ms with this
    table built, measured on the development machine); once per process."""
    from confusable_homoglyphs import confusables

    def clean(text: str) -> str:
        return text.replace("\u200e", "")  # the table wraps right-to-left letters in LRMs

    table = {clean(k): [clean(e["c"]) for e in v] for k, v in confusables.confusables_data.items()}
    mapping: dict[str, str] = {}
    for character, others in table.items():
        if len(character) != 1 or len(others) != 1 or others[0] == character:
            continue
        other = others[0]
        if len(other) == 1 and table.get(other) == [character]:
            # A pair: one representative for both, the one that case-folds if one does, so
            # that `look_alike_forms` goes on (`ᴀ` and Cherokee `ꭺ`: `ꭺ`, which folds to
            # U+13AA).
            other = min((c.casefold() == c, c) for c in (other, character))[1]
            if other == character:
                continue
        mapping[character] = other
    return mapping


def skeleton(text: str) -> str:
    """UTS #39's skeleton: NFD, each character to its prototype, NFD again."""
    table = prototypes()
    mapped = "".join(table.get(c, c) for c in unicodedata.normalize("NFD", text))
    return unicodedata.normalize("NFD", mapped)


def look_alike_forms(name: str) -> frozenset[str]:
    """The forms a name shares with names that could pass for it: the skeleton of the name
    and of its key (`name_key`: `POE` in Greek capitals passes for the Latin one as
    written, `ADMİN2` for `admin2` once case-folded), each case-folded as `name_key` does
    and skeletonized again until neither changes it (a small capital `ᴀ`'s prototype is
    Cherokee `ꭺ`, which case-folds to U+13AA, whose prototype is `A`), a dot above an i
    or j dropped (`İ` case-folds to `i` with U+0307). `name_key` itself is left as it is:
    the store's unique index and migration 0018 keep keys in that form."""
    return frozenset(settled_form(start) for start in (name, name_key(name)))


def settled_form(text: str) -> str:
    form = text
    for _ in range(8):  # two or three rounds settle any name; bounded all the same
        folded = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", skeleton(form)))
        folded = folded.casefold()
        folded = "".join(
            c
            for n, c in enumerate(folded)
            if not (c == SOFT_DOT and n and folded[n - 1] in SOFT_DOTTED)
        )
        if folded == form:
            break
        form = folded
    return form
