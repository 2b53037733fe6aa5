"""The web console and the API reference: how they are served (policy, caching, the off
switch), what their files may hold, and every page driven in a real browser (the system's
Chromium through Playwright) against a served process on each store."""

from __future__ import annotations

import contextlib
import itertools
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Route, expect

from graphsvc.console.assets import CONTENT_SECURITY_POLICY, load_console_files
from graphsvc.demo.collectors import Domain, write_sharphound
from graphsvc.demo.dataset import DOMAIN_SID, DemoResult, github_graph
from tests.conftest import (
    DEMO_SECRET,
    FIXTURES,
    OPENAPI,
    Env,
    check_against_openapi,
    chromium,
    ingest,
    served,
    wait_until,
)
from tests.conftest import server_environment as environment_of

STATIC = Path(__file__).parents[1] / "src" / "graphsvc" / "console" / "static"
ASSET_ADDRESS = re.compile(r'(?:src|href)="(/ui/[0-9a-f]+/assets/[\w.]+)"')
MEGABYTE = 1024 * 1024
SVG_NAMESPACE = "http://www.w3.org/2000/svg"
# What would turn a string into markup or code (a comment may name them).
MARKUP_SINKS = (
    r"\.(inner|outer)HTML\b",
    r"insertAdjacentHTML\(",
    r"document\.write",
    r"\beval\(",
    r"new Function\(",
    r"createContextualFragment",
)


def sid(rid: int) -> str:
    return f"{DOMAIN_SID}-{rid}"


# --- served as files ------------------------------------------------------------------------


def test_the_console_page_has_a_strict_policy_and_is_revalidated(env: Env) -> None:
    page = env.request("GET", "/ui/")
    assert page.status_code == 200
    assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert (
        "script-src 'self';" in CONTENT_SECURITY_POLICY and "unsafe" not in CONTENT_SECURITY_POLICY
    )
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["cache-control"] == "no-cache"
    assert b"{{ASSETS}}" not in page.content
    again = env.request("GET", "/ui/", {"If-None-Match": page.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    reference = env.request("GET", "/api/v2/docs")
    assert reference.status_code == 200
    assert reference.headers["content-security-policy"] == CONTENT_SECURITY_POLICY


def test_assets_are_named_by_the_release_and_kept_a_year(env: Env) -> None:
    addresses = ASSET_ADDRESS.findall(env.request("GET", "/ui/").text)
    assert {a.rsplit("/", 1)[1] for a in addresses} == {"console.css", "main.js"}
    for address in addresses:
        asset = env.request("GET", address)
        assert asset.status_code == 200
        assert asset.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert asset.content == (STATIC / address.rsplit("/", 1)[1]).read_bytes()
    # main.js imports its modules relative to itself: they are in the same release folder.
    folder = addresses[0].rsplit("/", 1)[0]
    assert env.request("GET", f"{folder}/dom.js").status_code == 200
    stale = env.request("GET", "/ui/0123456789abcdef/assets/main.js")
    assert stale.status_code == 404
    assert "reload" in stale.json()["errors"][0]["message"]
    missing = env.request("GET", f"{folder}/nothing.js")
    assert missing.status_code == 404 and missing.json()["errors"][0]["context"] == "name"


def test_the_release_changes_when_any_file_does(monkeypatch: pytest.MonkeyPatch) -> None:
    before = load_console_files()
    original = Path.read_bytes

    def edited(path: Path) -> bytes:
        body = original(path)
        return body + b"\n" if path.name == "chart.js" else body

    monkeypatch.setattr(Path, "read_bytes", edited)
    after = load_console_files()
    assert after.version != before.version
    assert after.version.encode() in after.pages["index.html"]


def test_the_root_redirects_to_the_console(env: Env) -> None:
    response = env.client.get("/", follow_redirects=False)
    check_against_openapi("GET", "/", response)
    assert response.status_code == 302
    assert response.headers["location"] == "/ui/"


def test_console_off_answers_404_on_each_of_its_routes(make_env: Callable[..., Env]) -> None:
    env = make_env(console="off")
    folder = f"/ui/{load_console_files().version}/assets"
    for path in ("/", "/ui/", "/api/v2/docs", f"{folder}/main.js"):
        response = env.request("GET", path)
        assert response.status_code == 404, path
        assert "GRAPHSVC_CONSOLE" in response.json()["errors"][0]["message"]
    assert env.request("GET", "/health").status_code == 200


def test_the_console_files_are_small_and_fetch_nothing_from_elsewhere() -> None:
    files = {path.name: path.read_text() for path in STATIC.iterdir()}
    assert sum(len(text.encode()) for text in files.values()) < MEGABYTE
    for name, text in files.items():
        # The SVG namespace is a name, never fetched.
        elsewhere = re.findall(r"https?://[^\s\"'`]*", text.replace(SVG_NAMESPACE, ""))
        assert not elsewhere, f"{name} names another origin: {elsewhere}"
        if name.endswith(".js"):
            # Markup is never built from strings: every value goes in as text.
            for sink in MARKUP_SINKS:
                assert not re.search(sink, text), f"{name} uses {sink}"
            assert not re.search(r"localStorage\.|document\.cookie", text), name
        if name.endswith(".html"):
            assert "<script>" not in text and "style=" not in text, f"{name} has inline code"


def test_each_entity_list_names_its_count_in_the_document(
    demo_env: tuple[Env, DemoResult],
) -> None:
    env, demo = demo_env
    lists = {
        path: operation["get"]["x-count-field"]
        for path, operation in OPENAPI["paths"].items()
        if path.startswith("/api/v2/computers/{object_id}/") and "x-count-field" in operation["get"]
    }
    # The seed's dcom-rights is the same list as dcom-users, which the console shows.
    assert len(lists) == 12 and "/api/v2/computers/{object_id}/dcom-rights" not in lists
    counts = env.get(f"/api/v2/computers/{demo.computer_object_ids[0]}?counts=true").json()["data"]
    assert set(lists.values()) <= set(counts), set(lists.values()) - set(counts)


# --- in a browser ---------------------------------------------------------------------------


class Console:
    """A signed-out tab on a served process, recording what its scripts complain of."""

    def __init__(self, browser: Browser, base: str, shots: Path) -> None:
        self.base = base
        self.shots = shots
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page: Page = self.context.new_page()
        self.problems: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", self.note_console)
        self.page.on("pageerror", lambda error: self.problems.append(f"error: {error}"))

        def refuse(dialog: object) -> None:
            self.dialogs.append(dialog.message)  # type: ignore[attr-defined]
            dialog.accept()  # type: ignore[attr-defined]

        self.page.on("dialog", refuse)

    def note_console(self, message: ConsoleMessage) -> None:
        # A 4xx the test provoked is logged by Chromium itself as a failed resource.
        if message.type == "error" and "Failed to load resource" not in message.text:
            self.problems.append(message.text)

    def sign_in(self, secret: str = DEMO_SECRET, username: str = "admin") -> None:
        self.page.goto(f"{self.base}/")
        self.page.fill("#username", username)
        self.page.fill("#secret", secret)
        self.page.click("#sign-in-form button[type=submit]")
        self.page.wait_for_selector("#nav:not([hidden])")

    def open(self, fragment: str, ready: str) -> None:
        self.page.goto(f"{self.base}/ui/#/{fragment}")
        self.page.wait_for_selector(ready)

    def follow(self, listed: str, name: str, then: str, page_kind: str) -> list[str]:
        """From the entity page's list `listed`, to the entity `name` it links to (a page of
        `page_kind`), and the first column of that entity's list `then`."""
        self.page.click(f".list-button[data-list={listed}]")
        self.page.click(f"table.entity-list a.entity-link >> text={name}")
        self.page.wait_for_selector(f".list-button[data-list={then}]")
        assert f"/entity/{page_kind}/" in self.page.url, self.page.url
        self.page.click(f".list-button[data-list={then}]")
        self.page.wait_for_selector(f"table.entity-list[data-list={then}] tbody tr")
        cells = self.page.locator("table.entity-list tbody tr td:first-child")
        return cells.all_inner_texts()

    def shoot(self, name: str, selector: str | None = None) -> None:
        """The page, or only what `selector` finds."""
        if selector is None:
            self.page.screenshot(path=str(self.shots / f"{name}.png"), full_page=True)
        else:
            self.page.locator(selector).screenshot(path=str(self.shots / f"{name}.png"))


@contextlib.contextmanager
def console_on(database_url: str, folder: Path) -> Iterator[Console]:
    """A process of its own serving this store, and a tab on it. Screenshots of each page
    are kept under the test's temporary folder (`screenshots/`)."""
    shots = folder / "screenshots"
    shots.mkdir()
    with served(environment_of(database_url, folder)) as (base, _), chromium() as browser:
        tab = Console(browser, base, shots)
        yield tab
        tab.context.close()
    assert tab.problems == [], tab.problems


@pytest.fixture
def console(
    demo_env: tuple[Env, DemoResult], database_url: str, tmp_path: Path
) -> Iterator[Console]:
    """The demo, served, and a signed-out tab on it."""
    with console_on(database_url, tmp_path) as tab:
        yield tab


def test_sign_in_and_see_the_statistics_as_charts(console: Console) -> None:
    console.sign_in()
    console.page.wait_for_selector(".environment")
    assert console.page.locator(".environment h2").all_inner_texts() == [
        "CONTOSO",
        "FABRIKAM",
        "CONTOSO.LOCAL",
        "GitHub: GHOrganization",
    ]
    github = console.page.inner_text("[data-environment-kind] dl")
    assert "GHUser\n6" in github and "relationships\n12" in github, github
    console.shoot("overview")
    console.page.click("#nav a[data-page=quality]")
    console.page.wait_for_selector("svg.chart .point")
    # The first source is the AD environment kind: its metrics over the demo's five runs.
    assert console.page.locator("svg.chart").count() >= 1
    assert console.page.locator("svg.chart .point").count() >= 5
    console.open(f"quality/tenant/{'6F1C2A3B-9D4E-4F5A-8B6C-7D8E9FA0B1C2'}", "svg.chart .point")
    users = console.page.locator('svg.chart g[data-series="users"] .point')
    assert users.count() == 30  # thirty daily collections in the default 30-day window
    console.page.select_option("#quality-window", "7")
    # Polled by selector: a predicate in JavaScript would be an eval, which the policy refuses.
    expect(users).to_have_count(7)
    assert console.page.locator("table.numbers tbody tr").count() == 7
    assert console.page.url.endswith("/7")  # the window is in the address, to link or reload
    assert "null" not in console.page.inner_text("#page")
    console.shoot("quality")
    # The session lives in this tab only: nothing persistent, nothing in the address.
    assert console.page.evaluate("localStorage.length") == 0
    assert console.context.cookies() == []
    token = console.page.evaluate("sessionStorage.getItem('graphsvc.session')")
    assert token and token not in console.page.url


def test_search_an_entity_and_open_its_lists(console: Console) -> None:
    console.sign_in()
    console.page.click("#nav a[data-page=entity]")
    console.page.fill("#entity-query", "file01")
    console.page.click("#entity-search button")
    console.page.wait_for_selector("#search-results a")
    console.page.click("#search-results a >> text=FILE01.CONTOSO.LOCAL")
    console.page.wait_for_selector(".list-button[data-list=dcom-users]")
    assert console.page.inner_text("h1.entity-name") == "FILE01.CONTOSO.LOCAL"
    console.page.click(".list-button[data-list=dcom-users]")
    rows = console.page.locator("table.entity-list[data-list=dcom-users] tbody tr")
    rows.first.wait_for()
    names = set(console.page.locator("table.entity-list tbody tr td:first-child").all_inner_texts())
    # DCOM OPERATORS holds it, and everyone nested in it; SVC_BACKUP directly.
    assert {
        "DCOM OPERATORS@CONTOSO.LOCAL",
        "BOB@CONTOSO.LOCAL",
        "SVC_BACKUP@CONTOSO.LOCAL",
    } <= names
    count = console.page.inner_text(".list-button[data-list=dcom-users] .count")
    assert int(count) == rows.count()
    # Each says which right it holds and the group it comes through.
    holds = dict(
        zip(
            console.page.locator("table.entity-list tbody tr td:first-child").all_inner_texts(),
            console.page.locator("table.entity-list tbody tr td:nth-child(3)").all_inner_texts(),
            strict=True,
        )
    )
    assert holds["SVC_BACKUP@CONTOSO.LOCAL"] == "ExecuteDCOM"
    assert holds["BOB@CONTOSO.LOCAL"].startswith("ExecuteDCOM through "), holds
    assert "through DCOM OPERATORS@CONTOSO.LOCAL" in holds["BOB@CONTOSO.LOCAL"], holds
    console.shoot("entity")
    # The open list is in the address: a reload (or the link) opens it again.
    assert console.page.url.endswith("/dcom-users")
    console.page.reload()
    console.page.wait_for_selector("table.entity-list[data-list=dcom-users] tbody tr")


@pytest.fixture
def adcs_console(
    demo_env: tuple[Env, DemoResult], database_url: str, tmp_path: Path
) -> Iterator[Console]:
    """The demo and the reference's ADCS collection, served (ingested before the browser
    starts: Playwright's loop and the ingest's cannot share the thread)."""
    env, _ = demo_env
    ingest(env, FIXTURES / "bloodhound-ce" / "fixtures" / "v6" / "all" / "adcs.zip")
    with console_on(database_url, tmp_path) as tab:
        yield tab


def test_certificate_services_objects_are_entities_linked_to_each_other(
    adcs_console: Console,
) -> None:
    """A certificate template's page lists the CAs it is published to, each a link to the
    CA's own page, which lists its place in the PKI."""
    console = adcs_console
    console.sign_in()
    console.open(
        "entity/certtemplates/72F15D5F-C7B4-4FD9-ADCE-302F0D3DC91A",
        ".list-button[data-list=published-to-cas]",
    )
    assert console.page.inner_text("h1.entity-name") == "USER@ESC1.LOCAL"
    listed = console.follow(
        "published-to-cas", "ESC1-ESC1-DC-CA@ESC1.LOCAL", "pki-hierarchy", "enterprisecas"
    )
    # Below the CA its host; above it its chain's root CA, the NTAuth store and the domain.
    assert {"ESC1-DC.ESC1.LOCAL", "ESC1.LOCAL"} <= set(listed), listed
    console.shoot("certificate-services")


@pytest.fixture
def testlab_console(
    demo_env: tuple[Env, DemoResult], database_url: str, tmp_path: Path
) -> Iterator[Console]:
    """The demo and the TESTLAB collection (whose trusts refer to two domains it does not
    collect), served."""
    env, _ = demo_env
    ingest(env, FIXTURES / "bloodhound-ce" / "fixtures" / "v6" / "ingest")
    with console_on(database_url, tmp_path) as tab:
        yield tab


def test_names_typed_whole_find_a_path_and_exposure_opens_on_a_collected_domain(
    testlab_console: Console,
) -> None:
    """Without picking a suggestion: a name one object has is taken as picked, one several
    have asks to pick. The exposure lists the collected domains first and opens on one;
    those only referred to (TESTLAB's trusts' other ends) come last, marked."""
    console = testlab_console
    console.sign_in()
    console.page.click("#nav a[data-page=paths]")
    console.page.wait_for_selector("table.exposure tbody tr")
    options = console.page.locator("#exposure-domain option").all_inner_texts()
    referred = [o for o in options if o.endswith(" (referred to only)")]
    assert referred == ["EXTERNAL.LOCAL (referred to only)", "TEST.LOCAL (referred to only)"]
    assert options[-2:] == referred and "TESTLAB.LOCAL" in options[:-2], options
    selected = "el => el.options[el.selectedIndex].text"
    assert console.page.eval_on_selector("#exposure-domain", selected) == options[0]
    console.page.fill("#path-from", "dfm@testlab.local")
    console.page.fill("#path-to", "Domain Admins@TESTLAB.LOCAL")
    console.page.click("#path-form button[type=submit]")
    console.page.wait_for_selector("svg.path-graph .node")
    assert "DFM@TESTLAB.LOCAL" in console.page.inner_text("#path-from-name")
    console.page.fill("#path-to", "domain admins")
    console.page.click("#path-form button[type=submit]")
    note = console.page.wait_for_selector("#path-unresolved .notice")
    assert note is not None and "pick one of the suggestions" in note.inner_text()
    console.page.wait_for_selector("#path-to-choices .choice")


def owned_members(env: Env) -> list[str]:
    members = env.get("/api/v2/asset-groups/2/members").json()["data"]["members"]
    return [m["object_id"] for m in members]


def test_mark_owned_from_an_entity_and_a_path_and_see_the_tags(
    demo_env: tuple[Env, DemoResult], database_url: str, tmp_path: Path
) -> None:
    """Owned marked on DFM's page, its paths to Tier Zero drawn from the tags, unmarked from
    the path's objects; a label made from a Cypher query, previewed then kept."""
    env, _ = demo_env
    ingest(env, FIXTURES / "bloodhound-ce" / "fixtures" / "v6" / "ingest")
    dfm = "S-1-5-21-3130019616-2776909439-2417379446-1105"  # DFM, of TESTLAB
    with console_on(database_url, tmp_path) as console:
        console.sign_in()
        console.open(f"entity/users/{dfm}", "#entity-mark-owned")
        assert console.page.inner_text("#entity-mark-owned") == "Mark owned"
        console.page.click("#entity-mark-owned")
        console.page.wait_for_selector("#entity-badges .badge.owned")
        assert console.page.inner_text("#entity-mark-owned") == "Unmark owned"
        # The console's server wrote it: this process hears of it a moment later (NOTIFY).
        wait_until(lambda: owned_members(env) == [dfm], what="the mark to be seen")
        console.shoot("entity-owned")
        console.page.click("#nav a[data-page=paths]")
        console.page.wait_for_selector("#tag-path-form")
        console.page.select_option("#tag-path-from", label="Owned")
        console.page.select_option("#tag-path-to", label="Tier Zero")
        console.page.click("#tag-path-form button[type=submit]")
        console.page.wait_for_selector("#tag-path-output svg.path-graph .node.start")
        query = "start_tag=owned&end_tag=tier-zero"
        answer = env.get(f"/api/v2/graphs/paths-between?{query}").json()["data"]
        summary = console.page.inner_text("#tag-path-summary")
        assert summary.startswith(f"{len(answer['paths'])} shortest paths from 1 ")
        drawn = console.page.locator("#tag-path-output svg .node").count()
        assert drawn == len(answer["nodes"])
        # The paths offered one by one are the answer's own, each highlighted on its own.
        offered = min(len(answer["paths"]), 50)
        position = console.page.locator("#tag-path-output .path-position")
        expect(position).to_contain_text(f"All {offered} paths")
        console.page.click("#tag-path-output .path-next")
        expect(position).to_contain_text(f"Path 1 of {offered}")
        lit = console.page.locator("#tag-path-output .edge.on-path").evaluate_all(
            "edges => edges.map(e => +e.dataset.index)"
        )
        assert sorted(lit) == sorted(answer["paths"][0])
        console.shoot("paths-between-tags")
        row = console.page.locator("#tag-path-output table.path-objects tr", has_text="DFM@")
        row.locator("button.mark-owned").click()
        row.locator("button.mark-owned", has_text="Mark owned").wait_for()
        wait_until(lambda: owned_members(env) == [], what="the mark to be gone")
        console.page.click("#nav a[data-page=tags]")
        console.page.wait_for_selector("table.tags tbody tr")
        rows = console.page.locator("table.tags tbody tr").all_inner_texts()
        assert rows[0].startswith("Tier Zero\ttier\t") and rows[1].startswith("Owned\towned\t0\t")
        console.page.fill("#tag-new-name", "Workstations")
        console.page.fill(
            "#tag-new-query", "MATCH (c:Computer) WHERE c.name STARTS WITH 'WIN' RETURN c"
        )
        console.page.click("#tag-preview")
        console.page.wait_for_selector("table.tag-preview tbody tr")
        previewed = console.page.locator(
            "table.tag-preview tbody tr td:first-child"
        ).all_inner_texts()
        assert previewed and all(name.startswith("WIN") for name in previewed), previewed
        console.page.click("#tag-new button[type=submit]")
        console.page.wait_for_selector("#tag-name")
        assert console.page.inner_text("#tag-name") == "Workstations"
        members = console.page.locator(
            "table.tag-members tbody tr td:first-child"
        ).all_inner_texts()
        assert sorted(members) == sorted(previewed)
        console.shoot("tag-label")


def test_draw_a_path_and_the_exposure_of_a_domain(console: Console) -> None:
    console.sign_in()
    console.page.click("#nav a[data-page=paths]")
    console.page.wait_for_selector("table.exposure tbody tr")
    console.page.fill("#path-from", "bob@")
    console.page.click("#path-from-choices .choice")
    console.page.fill("#path-to", "domain admins")
    console.page.click("#path-to-choices .choice")
    console.page.click("#path-form button[type=submit]")
    console.page.wait_for_selector("svg.path-graph .node")
    kinds = console.page.locator("svg.path-graph .edge").evaluate_all(
        "edges => edges.map(e => e.dataset.kind)"
    )
    assert sorted(kinds) == ["AdminTo", "HasSession", "MemberOf", "MemberOf", "MemberOf"]
    assert console.page.locator("svg.path-graph .node").count() == 6
    assert console.page.locator("svg.path-graph .node.start").get_attribute(
        "data-object-id"
    ) == sid(1105)
    summary = console.page.inner_text(".exposure-summary")
    assert summary.startswith("5 of the domain's 11 enabled users")
    # The edges listed in path order, from the start.
    first = console.page.locator("table.path-edges tbody tr").first.inner_text()
    assert first.startswith("BOB@CONTOSO.LOCAL"), first
    assert "BOB@CONTOSO.LOCAL (User)" in console.page.inner_text("#path-from-name")
    console.shoot("paths")


def test_run_a_cypher_query_from_the_list_and_typed(console: Console) -> None:
    console.sign_in()
    console.page.click("#nav a[data-page=cypher]")
    console.page.click("#cypher-starters .choice >> text=Who is in Domain Admins")
    console.page.wait_for_selector("svg.path-graph .node")
    kinds = console.page.locator("svg.path-graph .edge").evaluate_all(
        "edges => edges.map(e => e.dataset.kind)"
    )
    assert kinds and set(kinds) == {"MemberOf"}
    names = console.page.locator("table.cypher-nodes tbody tr").all_inner_texts()
    assert any(name.startswith("DOMAIN ADMINS@") for name in names), names
    query = "MATCH (u:User) RETURN u.name AS name, u.enabled AS enabled ORDER BY name LIMIT 3"
    console.page.fill("#cypher-query", query)
    console.page.click("#cypher-form button[type=submit]")
    console.page.wait_for_selector("table.cypher-values tbody tr")
    headings = console.page.locator("table.cypher-values th").all_inner_texts()
    assert headings == ["name", "enabled"]
    rows = console.page.locator("table.cypher-values tbody tr").all_inner_texts()
    assert len(rows) == 3 and rows == sorted(rows), rows
    console.page.fill("#cypher-query", "MATCH (n) DETACH DELETE n")
    console.page.click("#cypher-form button[type=submit]")
    refused = console.page.wait_for_selector("#cypher-output .notice.error")
    assert refused is not None
    assert "updating clauses are not supported" in refused.inner_text()
    console.shoot("cypher")


def test_save_a_cypher_query_run_it_from_the_list_and_delete_it(console: Console) -> None:
    console.sign_in()
    console.page.click("#nav a[data-page=cypher]")
    console.page.wait_for_selector("#cypher-saved li")
    assert "None yet" in console.page.inner_text("#cypher-saved")
    query = "MATCH (g:Group) WHERE g.objectid ENDS WITH '-512' RETURN g.name AS name"
    console.page.fill("#cypher-query", query)
    console.page.fill("#cypher-save-name", "Domain admins <b>groups</b>")
    console.page.click("#cypher-save button[type=submit]")
    saved = console.page.wait_for_selector("#cypher-saved .choice")
    assert saved is not None and saved.inner_text() == "Domain admins <b>groups</b>"  # as text
    # The same name again is refused, and says why.
    console.page.fill("#cypher-save-name", "Domain admins <b>groups</b>")
    console.page.click("#cypher-save button[type=submit]")
    refused = console.page.wait_for_selector("#cypher-save-status .notice.error")
    assert refused is not None and "already have a saved query" in refused.inner_text()
    console.page.fill("#cypher-query", "")
    console.page.click("#cypher-saved .choice")
    console.page.wait_for_selector("table.cypher-values tbody tr")
    assert console.page.input_value("#cypher-query") == query
    rows = console.page.locator("table.cypher-values tbody tr").all_inner_texts()
    assert rows and all(row.startswith("DOMAIN ADMINS@") for row in rows), rows
    console.page.click("#cypher-saved .remove")
    console.page.wait_for_function(
        "() => document.querySelector('#cypher-saved').innerText.includes('None yet')"
    )
    console.shoot("cypher-saved")


def test_create_and_revoke_a_token(console: Console) -> None:
    console.sign_in()
    console.open("tokens", "#token-table")
    console.page.fill("#token-name", "made in the console")
    console.page.select_option("#token-lifetime", str(30 * 86400))
    console.page.click("#token-form button[type=submit]")
    key = console.page.inner_text("#new-token-key")
    token_id = console.page.inner_text("#new-token-id")
    assert len(key) >= 40
    row = console.page.locator(f"button.revoke[data-token-id='{token_id}']")
    row.wait_for()
    expires = console.page.locator("#token-table tr", has=row).inner_text()
    assert "never" not in expires  # thirty days
    console.shoot("tokens")
    console.page.click(f"button.revoke[data-token-id='{token_id}']")
    row.wait_for(state="detached")
    assert console.page.locator("#new-token-key").count() == 0  # no key of a revoked token
    assert console.dialogs and "Revoke the token" in console.dialogs[0]
    # Another, shown once: after a reload its key is nowhere on the page.
    console.page.fill("#token-name", "kept")
    console.page.click("#token-form button[type=submit]")
    key = console.page.inner_text("#new-token-key")
    console.page.reload()
    console.page.wait_for_selector("#token-table")
    assert key not in console.page.content()


def test_upload_a_file_and_see_it_complete(console: Console, tmp_path: Path) -> None:
    # A name no header can hold as it is: the console sends it in RFC 5987's form.
    collected = tmp_path / "github-\u65e5\u672c.json"
    collected.write_text(json.dumps(github_graph()))
    console.sign_in()
    console.open("uploads", "#job-table")
    console.page.set_input_files("#upload-files", str(collected))
    console.page.wait_for_selector("#job-status.status-2", timeout=60_000)
    console.page.wait_for_selector("#file-results tbody tr")
    result = console.page.locator("#file-results tbody tr").first.inner_text()
    assert collected.name in result and "none" in result
    assert "Complete" in console.page.inner_text("#job-table")
    console.shoot("uploads")
    notes = tmp_path / "notes.txt"
    notes.write_text("not collected")
    jobs = console.page.locator("#job-table tbody tr").count()
    console.page.set_input_files("#upload-files", str(notes))
    refusal = console.page.inner_text("#upload-progress .notice")
    assert "notes.txt" in refusal and "Nothing was sent" in refusal
    assert console.page.locator("#job-table tbody tr").count() == jobs


def test_drop_a_file_to_upload_it(console: Console) -> None:
    console.sign_in()
    console.open("uploads", "#job-table")
    dropped = console.page.evaluate_handle(
        """graph => {
            const files = new DataTransfer();
            files.items.add(new File([graph], "dropped.json", {type: "application/json"}));
            return files;
        }""",
        json.dumps(github_graph()),
    )
    console.page.dispatch_event("#upload-drop", "dragover", {"dataTransfer": dropped})
    assert "over" in (console.page.get_attribute("#upload-drop", "class") or "")
    console.page.dispatch_event("#upload-drop", "drop", {"dataTransfer": dropped})
    console.page.wait_for_selector("#job-status.status-2", timeout=60_000)
    assert "dropped.json" in console.page.inner_text("#file-results")


def test_the_api_reference_tries_an_operation_as_the_signed_in_user(console: Console) -> None:
    console.sign_in()
    console.page.goto(f"{console.base}/api/v2/docs")
    console.page.wait_for_selector("body[data-ready=true]")
    assert console.page.locator("[data-operation-id]").count() == len(
        [op for methods in OPENAPI["paths"].values() for op in methods.values()]
    )
    console.page.click("[data-operation-id=GetSelf] summary")
    console.page.click("[data-operation-id=GetSelf] .try-send")
    output = console.page.locator("[data-operation-id=GetSelf] .try-output[data-status='200']")
    output.wait_for()
    assert '"principal_name": "admin"' in output.inner_text()
    console.shoot("api-reference")


def test_the_navigation_shows_the_pages_a_user_may_read(
    demo_env: tuple[Env, DemoResult], database_url: str, tmp_path: Path
) -> None:
    env, _ = demo_env
    env.user_with_token("uploader", "Upload-Only", secret="another-secret-2")
    with console_on(database_url, tmp_path) as tab:
        tab.sign_in("another-secret-2", "uploader")
        tab.page.wait_for_selector("#job-table")  # the first page it may read
        shown = tab.page.locator("#nav a:visible").all_inner_texts()
        assert shown == ["Uploads", "API reference"], shown


def test_a_page_still_loading_at_sign_out_is_never_drawn(console: Console) -> None:
    console.sign_in()
    held: list[Route] = []

    def hold(route: Route) -> None:  # answered only when the test says
        held.append(route)

    console.page.route("**/api/v2/tokens*", hold)
    console.page.goto(f"{console.base}/ui/#/tokens")
    while not held:
        console.page.wait_for_timeout(20)
    console.page.click("#sign-out")
    console.page.wait_for_selector("#sign-in-form", state="visible")
    held[0].continue_()
    console.page.wait_for_timeout(500)
    # The tokens answered after sign-out (refused, or not) show nothing under the form.
    assert console.page.inner_text("#page") == ""
    assert console.page.evaluate("sessionStorage.length") == 0


def test_a_malformed_or_unknown_address_shows_a_message(console: Console) -> None:
    console.sign_in()
    console.open("entity/users/%E0%A4%A", "#page .notice")
    assert "%E0%A4%A" in console.page.inner_text("#page .notice")
    console.open("constructor", ".environment")  # not a page: the overview
    console.open("quality/domain/S-1-5-21-0-0-0", "svg.chart .point")
    assert "No environment by that id" in console.page.inner_text("#page .notice")


HOSTILE = {
    "image": '<img src=x onerror="window.__pwned=1">',
    "script": "<script>window.__pwned=2</script>",
    "svg": '<svg onload="window.__pwned=3"></svg>',
}


def hostile_domain() -> Domain:
    """Names that run script if a page ever inserts them as markup."""
    domain = Domain("EVIL.LOCAL", "S-1-5-21-1-2-3")
    domain.users = {1100: HOSTILE["image"], 1101: "PLAIN USER"}
    domain.groups = {512: "DOMAIN ADMINS", 1200: HOSTILE["script"]}
    domain.computers = {1300: HOSTILE["svg"]}
    domain.members = {1200: [1100], 512: [1101]}
    domain.admins = {1300: [1200]}
    domain.sessions = {1300: [1101]}
    return domain


def test_hostile_names_render_as_text(
    demo_env: tuple[Env, DemoResult], database_url: str, tmp_path: Path
) -> None:
    env, _ = demo_env
    ingest(env, *write_sharphound(tmp_path / "hostile", hostile_domain()))
    with console_on(database_url, tmp_path) as tab:
        tab.sign_in()
        tab.open("entity/search/window.__pwned", "#search-results tbody tr")
        names = set(tab.page.locator("#search-results tbody td:first-child").all_inner_texts())
        assert {f"{name}@EVIL.LOCAL" for name in (HOSTILE["image"], HOSTILE["script"])} <= names
        tab.page.click(f"#search-results a >> text={HOSTILE['script']}@EVIL.LOCAL")
        tab.page.wait_for_selector(".list-button[data-list=members]")
        tab.page.click(".list-button[data-list=members]")
        tab.page.wait_for_selector("table.entity-list tbody tr")
        tab.open("paths/S-1-5-21-1-2-3-1100/S-1-5-21-1-2-3-512", "svg.path-graph .node")
        labels = tab.page.locator("svg.path-graph .node title").all_text_contents()
        assert any(HOSTILE["svg"] in label for label in labels)
        tab.shoot("hostile-names")
        assert tab.page.evaluate("window.__pwned") is None
        # Nothing the names hold became an element.
        for tag in ("img", "script", "svg[onload]", "[onerror]"):
            assert tab.page.locator(f"#page {tag}").count() == 0, tag
        assert tab.dialogs == []


@pytest.fixture
def azure_console(
    demo_env: tuple[Env, DemoResult], database_url: str, tmp_path: Path
) -> Iterator[Console]:
    """The demo and the Contoso tenant of tests/test_azure_graph.py, served."""
    env, _ = demo_env
    ingest(env, FIXTURES / "azure" / "contoso")
    with console_on(database_url, tmp_path) as tab:
        yield tab


def test_azure_objects_are_entities_with_the_reference_lists(azure_console: Console) -> None:
    """A user found by name opens on the Azure route's answer: its lists with their sizes;
    its roles list names the role it holds through its group, a link to the role's page,
    which lists who holds it."""
    console = azure_console
    console.sign_in()
    console.page.click("#nav a[data-page=entity]")
    console.page.fill("#entity-query", "dave@contoso")
    console.page.click("#entity-search button")
    console.page.click("#search-results a >> text=DAVE@CONTOSO.EXAMPLE")
    console.page.wait_for_selector(".list-button[data-list=roles]")
    assert "/entity/azure/users/" in console.page.url
    assert console.page.inner_text(".list-button[data-list=roles] .count") == "1"
    listed = console.follow("roles", "INTUNE@CONTOSO", "active-assignments", "azure/roles")
    assert set(listed) == {"DAVE@CONTOSO.EXAMPLE", "TIER0 ADMINS@CONTOSO"}, listed
    console.shoot("azure-entity")
    console.open(
        "entity/azure/tenants/6C12B0B0-B2CC-4A73-8252-0B94BFCA2145",
        ".list-button[data-list=descendent-users]",
    )
    assert console.page.inner_text(".list-button[data-list=descendent-users] .count") == "6"


PAGES_SID = "S-1-5-21-8-8-8"


@pytest.fixture
def pages_console(
    demo_env: tuple[Env, DemoResult], database_url: str, tmp_path: Path
) -> Iterator[Console]:
    """The demo and a generated domain of 240 users, served."""
    from bench.shapes import LargeDomain

    env, _ = demo_env
    folder = tmp_path / "pages"
    folder.mkdir()
    LargeDomain.of_size("PAGES.LOCAL", PAGES_SID, 300).write(folder)
    ingest(env, folder)
    with console_on(database_url, tmp_path) as tab:
        yield tab


def test_long_lists_and_exposure_page_through_every_row(pages_console: Console) -> None:
    """A domain's 240 users, a hundred at a time, and its exposure fifty at a time: Next and
    Previous open every row, each page a different one."""
    console = pages_console
    console.sign_in()
    console.open(f"entity/domains/{PAGES_SID}/users", "table.entity-list[data-list=users] tbody tr")
    range_text = console.page.locator("#entity-list-box .page-range")
    seen: set[str] = set()
    dash = "\u2013"  # the en dash of the pager's ranges
    for expected in (f"1{dash}100 of 240", f"101{dash}200 of 240", f"201{dash}240 of 240"):
        expect(range_text).to_have_text(expected)
        names = console.page.locator("table.entity-list tbody tr td:first-child").all_inner_texts()
        assert len(names) == (40 if expected.startswith("201") else 100)
        assert seen.isdisjoint(names), "a page shows rows of another"
        seen |= set(names)
        if not expected.startswith("201"):
            console.page.click("#entity-list-box .page-next")
    assert len(seen) == 240
    assert console.page.locator("#entity-list-box .page-next").is_disabled()
    console.page.click("#entity-list-box .page-previous")
    expect(range_text).to_have_text(f"101{dash}200 of 240")
    console.shoot("list-pages")
    console.open("paths", "#exposure-domain")
    console.page.select_option("#exposure-domain", PAGES_SID)
    expect(console.page.locator(".exposure-summary")).to_contain_text("225 enabled users")
    total = int(console.page.inner_text(".exposure-summary").split("; ")[1].split()[0])
    assert total > 50, total  # more than a page
    first = set(console.page.locator("table.exposure tbody tr td:first-child").all_inner_texts())
    console.page.click("#exposure-output .page-next")
    expect(console.page.locator("#exposure-output .page-range")).to_contain_text(f"51{dash}")
    second = set(console.page.locator("table.exposure tbody tr td:first-child").all_inner_texts())
    assert first.isdisjoint(second) and len(first) == 50
    # The AD kind's aggregations now have more relationship kinds than there are colours:
    # several charts, the series of each of distinct colours.
    console.open("quality", "svg.chart .point")
    captions = console.page.locator("figcaption").all_inner_texts()
    assert any("(1 of " in caption.lower() for caption in captions), captions
    for chart in console.page.locator("svg.chart").all():
        colours = [g.get_attribute("class") for g in chart.locator("g.series").all()]
        assert len(colours) == len(set(colours)), colours
    console.shoot("quality-many-series")


# --- a path answer of sixty objects --------------------------------------------------------

MANY_SID = "S-1-5-21-6-6-6"
MANY_START = 3000  # ALICE, four steps from Domain Admins by hundreds of ways
CITIES = (
    "OSLO",
    "LIMA",
    "CAIRO",
    "QUITO",
    "DAKAR",
    "HANOI",
    "SEOUL",
    "MACAU",
    "PERTH",
    "TUNIS",
    "BASEL",
    "GENOA",
    "NANCY",
    "TURIN",
    "MALMO",
    "LYON",
    "PUNE",
    "KOBE",
    "RIGA",
    "BERN",
)


def many_paths_domain() -> Domain:
    """ALICE is in 10 groups (GenericAll on 5 of them too), each admin of 3 of 20 computers
    (DCOM on one of them too); each computer has sessions of 3 of 28 admins, each in Domain
    Admins (GenericAll on it for 10): 60 objects and 153 edges on its shortest paths there.
    The names run in an order unrelated to who reaches whom, and many are longer than a
    drawing's label."""
    domain = Domain("MANY.LOCAL", MANY_SID)
    groups = [1200 + i for i in range(10)]
    computers = [1300 + i for i in range(20)]
    admins = [1100 + i for i in range(28)]
    domain.users = {MANY_START: "ALICE"}
    domain.users |= {rid: f"{CITIES[(i * 7) % 20]} OPERATOR {i:02}" for i, rid in enumerate(admins)}
    domain.groups = {512: "DOMAIN ADMINS"}
    domain.groups |= {
        rid: f"{CITIES[(i * 3) % 10]} SERVER ADMINISTRATORS GROUP" for i, rid in enumerate(groups)
    }
    domain.computers = {
        rid: f"{CITIES[(i * 9) % 20]}-SRV-{i:02}" for i, rid in enumerate(computers)
    }
    domain.members = {rid: [MANY_START] for rid in groups} | {512: admins}
    domain.aces = {rid: [(MANY_START, "GenericAll")] for rid in groups[:5]}
    domain.aces[512] = [(rid, "GenericAll") for rid in admins[:10]]
    domain.admins = {
        rid: [g for i, g in enumerate(groups) if c in (2 * i, 2 * i + 1, (2 * i + 2) % 20)]
        for c, rid in enumerate(computers)
    }
    domain.dcom = {computers[2 * i + 1]: [g] for i, g in enumerate(groups)}
    domain.sessions = {
        rid: [admins[(3 * c + k) % 28] for k in range(3)] for c, rid in enumerate(computers)
    }
    return domain


@pytest.fixture
def many_paths_console(
    demo_env: tuple[Env, DemoResult], database_url: str, tmp_path: Path
) -> Iterator[tuple[Console, dict[str, Any]]]:
    """The demo and many_paths_domain, served, with the server's own answer of ALICE's
    shortest paths to Domain Admins."""
    env, _ = demo_env
    ingest(env, *write_sharphound(tmp_path / "many", many_paths_domain()))
    query = f"start_node={MANY_SID}-{MANY_START}&end_node={MANY_SID}-512"
    answer = env.get(f"/api/v2/graphs/shortest-path?{query}").json()["data"]
    with console_on(database_url, tmp_path) as tab:
        yield tab, answer


def node_key(answer: dict[str, Any], object_id: str) -> str:
    return str(next(k for k, n in answer["nodes"].items() if n["objectId"] == object_id))


def distances_over(
    answer: dict[str, Any],
    starts: list[str],
    backward: bool = False,
    hidden: frozenset[str] = frozenset(),
) -> dict[str, int]:
    """Breadth-first distances over the answer's edges of the kinds not hidden."""
    step: dict[str, list[str]] = {}
    for edge in answer["edges"]:
        if edge["kind"] not in hidden:
            a, b = (
                (edge["target"], edge["source"]) if backward else (edge["source"], edge["target"])
            )
            step.setdefault(a, []).append(b)
    found = dict.fromkeys(starts, 0)
    queue = list(starts)
    while queue:
        at = queue.pop(0)
        for nxt in step.get(at, []):
            if nxt not in found:
                found[nxt] = found[at] + 1
                queue.append(nxt)
    return found


def count_shortest_paths(
    answer: dict[str, Any], start: str, end: str, hidden: frozenset[str] = frozenset()
) -> int:
    """The start's shortest paths to the end over the kinds not hidden, parallel edges
    counted apart."""
    distance = distances_over(answer, [start], hidden=hidden)
    ways = {start: 1}
    for at in sorted(distance, key=distance.__getitem__):
        for edge in answer["edges"]:
            onward = distance.get(edge["target"]) == distance[at] + 1
            if edge["source"] == at and edge["kind"] not in hidden and at != end and onward:
                ways[edge["target"]] = ways.get(edge["target"], 0) + ways[at]
    return ways.get(end, 0)


def crossings_of(order: dict[str, tuple[float, float]], edges: list[dict[str, Any]]) -> int:
    """Edges between neighbouring columns that cross, nodes at (column x, y)."""
    spans: dict[float, list[tuple[float, float]]] = {}
    for edge in edges:
        (x1, y1), (x2, y2) = order[edge["source"]], order[edge["target"]]
        if x1 < x2:
            spans.setdefault(x1, []).append((y1, y2))
    return sum(
        1
        for between in spans.values()
        for i, p in enumerate(between)
        for q in between[i + 1 :]
        if (p[0] - q[0]) * (p[1] - q[1]) < 0
    )


DRAWN_STATE = """svg => ({
    viewBox: svg.getAttribute('viewBox'),
    nodes: [...svg.querySelectorAll('.node')].map(n => ({
        key: n.dataset.id, objectId: n.dataset.objectId,
        x: +n.dataset.x, y: +n.dataset.y,
        label: n.querySelector('.node-label').textContent,
        title: n.querySelector('title').textContent,
        box: (b => [b.x, b.y, b.width, b.height])(n.querySelector('.node-label').getBBox()),
        frame: (b => [b.x, b.y, b.width, b.height])(n.querySelector('.box').getBBox()),
        classes: n.getAttribute('class'),
        opacity: +getComputedStyle(n).opacity})),
    edges: [...svg.querySelectorAll('.edge')].map(e => ({
        index: +e.dataset.index, kind: e.dataset.kind, from: e.dataset.from, to: e.dataset.to,
        classes: e.getAttribute('class'), hidden: getComputedStyle(e).display === 'none',
        opacity: +getComputedStyle(e).opacity})),
})"""
EDGE_MIDDLE = """(svg, index) => {
    const line = svg.querySelector(`.edge[data-index="${index}"] .line`);
    const point = line.getPointAtLength(line.getTotalLength() / 2);
    const screen = point.matrixTransform(line.getScreenCTM());
    return [screen.x, screen.y];
}"""
POINT_UNDER = """(svg, [x, y]) => {
    const p = new DOMPoint(x, y).matrixTransform(svg.getScreenCTM().inverse());
    return [p.x, p.y];
}"""


def view_box(text: str) -> list[float]:
    return [float(v) for v in text.split()]


def test_a_path_answer_of_sixty_objects_reads_path_by_path(
    many_paths_console: tuple[Console, dict[str, Any]],
) -> None:
    """ALICE's shortest paths to Domain Admins, 60 objects on 153 edges as the server
    answers them, drawn in columns by distance with fewer crossings than by name, no two
    names overlapping; an edge's kind shown when pointed at; zoomed by wheel and buttons,
    panned by a drag, fitted again; each path highlighted on its own, each a real path
    from ALICE to Domain Admins; a kind unchecked hides exactly its edges."""
    console, answer = many_paths_console
    start, end = f"{MANY_SID}-{MANY_START}", f"{MANY_SID}-512"
    start_key, end_key = node_key(answer, start), node_key(answer, end)
    assert len(answer["nodes"]) >= 60 and len(answer["edges"]) >= 150
    console.sign_in()
    console.open(f"paths/{start}/{end}", "#path-output svg.path-graph .node")
    page = console.page
    drawing = page.locator("#path-output svg.path-graph")
    drawing.scroll_into_view_if_needed()
    state = drawing.evaluate(DRAWN_STATE)
    console.shoot("paths-60-nodes", "#path-output figure")
    assert len(state["nodes"]) == len(answer["nodes"])
    assert len(state["edges"]) == len(answer["edges"])
    assert sorted(e["kind"] for e in state["edges"]) == sorted(e["kind"] for e in answer["edges"])

    # Columns by distance from ALICE; within them, fewer crossings than the names' order.
    distance = distances_over(answer, [start_key])
    at = {n["key"]: (n["x"], n["y"]) for n in state["nodes"]}
    column_x = {distance[k]: x for k, (x, _) in at.items()}
    assert len(column_x) == 5 and all(at[k][0] == column_x[distance[k]] for k in at)
    by_name: dict[str, tuple[float, float]] = {}
    for column in range(5):
        members = sorted(
            (k for k in at if distance[k] == column), key=lambda k: answer["nodes"][k]["label"]
        )
        by_name |= {k: (float(column), float(rank)) for rank, k in enumerate(members)}
    drawn_crossings = crossings_of(at, answer["edges"])
    named_crossings = crossings_of(by_name, answer["edges"])
    assert drawn_crossings < named_crossings * 0.75, (drawn_crossings, named_crossings)
    assert drawing.get_attribute("data-crossings") == str(drawn_crossings)

    # No two names (nor nodes) overlap; a long name is cut short, whole in the node's title.
    for boxes in ([n["box"] for n in state["nodes"]], [n["frame"] for n in state["nodes"]]):
        for i, (x1, y1, w1, h1) in enumerate(boxes):
            assert w1 > 0 and h1 > 0
            for x2, y2, w2, h2 in boxes[i + 1 :]:
                apart = x1 + w1 <= x2 or x2 + w2 <= x1 or y1 + h1 <= y2 or y2 + h2 <= y1
                assert apart, ((x1, y1, w1, h1), (x2, y2, w2, h2))
    for node in state["nodes"]:  # each name within its node's box
        (x1, y1, w1, h1), (x2, y2, w2, h2) = node["box"], node["frame"]
        assert x2 <= x1 and x1 + w1 <= x2 + w2 and y2 <= y1 and y1 + h1 <= y2 + h2, node
    cut = [n for n in state["nodes"] if n["label"].endswith("\u2026")]
    assert len(cut) >= 30, [n["label"] for n in state["nodes"]]
    for node in cut:
        whole = answer["nodes"][node["key"]]["label"]
        assert whole.startswith(node["label"][:-1]) and whole in node["title"]

    # No kind written on an edge until it is pointed at; then its kind, by it.
    assert drawing.locator(".edges text").count() == 0
    hover = drawing.locator(".edge-hover")
    page.mouse.move(5, 5)
    assert hover.get_attribute("visibility") == "hidden"
    first_step = next(
        i
        for i, e in enumerate(answer["edges"])
        if e["source"] == start_key and e["kind"] == "MemberOf"
    )
    page.mouse.move(*drawing.evaluate(EDGE_MIDDLE, first_step))
    expect(hover).to_have_attribute("visibility", "visible")
    pointed = drawing.locator(".edge.hovered")
    assert pointed.count() == 1
    assert drawing.locator(".edge-hover-text").text_content() == pointed.get_attribute("data-kind")
    assert pointed.get_attribute("data-from") == start
    titled = pointed.locator("title").text_content() or ""
    assert f"\u2014{pointed.get_attribute('data-kind')}\u2192" in titled
    console.shoot("paths-60-nodes-edge-pointed", "#path-output figure")
    page.mouse.move(5, 5)
    expect(hover).to_have_attribute("visibility", "hidden")

    # Zoom by the buttons (Enter on one too), by the wheel about the pointer; a drag pans,
    # and so do the arrow keys; Fit (or 0) shows the whole again.
    whole = drawing.get_attribute("viewBox") or ""
    x, _, w, h = view_box(whole)
    page.click("#path-output .zoom-in")
    zoomed = view_box(drawing.get_attribute("viewBox") or "")
    assert zoomed[2] == pytest.approx(w / 1.25, rel=1e-3)
    assert zoomed[0] + zoomed[2] / 2 == pytest.approx(x + w / 2, abs=0.1)
    page.focus("#path-output .zoom-out")
    page.keyboard.press("Enter")
    assert view_box(drawing.get_attribute("viewBox") or "")[2] == pytest.approx(w, rel=1e-3)
    box = drawing.bounding_box()
    assert box is not None
    # Whole pixels: the wheel's event has the pointer's place in them.
    pointer = (round(box["x"] + box["width"] * 0.3), round(box["y"] + box["height"] * 0.6))
    under = drawing.evaluate(POINT_UNDER, pointer)
    page.mouse.move(*pointer)
    before = drawing.get_attribute("viewBox") or ""
    page.mouse.wheel(0, -300)
    expect(drawing).not_to_have_attribute("viewBox", before)
    wheeled = view_box(drawing.get_attribute("viewBox") or "")
    assert wheeled[2] < w * 0.7
    assert drawing.evaluate(POINT_UNDER, pointer) == pytest.approx(under, abs=0.5)
    console.shoot("paths-60-nodes-zoomed", "#path-output figure")
    # Pixels per drawing unit: the whole fitted to the box, times the zoom since.
    scale = min(box["width"] / w, box["height"] / h) * w / wheeled[2]
    page.mouse.down()
    page.mouse.move(pointer[0] + 120, pointer[1] + 60, steps=6)
    page.mouse.up()
    panned = view_box(drawing.get_attribute("viewBox") or "")
    assert panned[2:] == wheeled[2:]
    assert panned[0] == pytest.approx(wheeled[0] - 120 / scale, rel=0.02)
    assert panned[1] == pytest.approx(wheeled[1] - 60 / scale, rel=0.02)
    assert "/entity/" not in page.url  # a drag that began anywhere follows no link
    drawing.focus()  # the keys: arrows pan, 0 fits, + zooms
    page.keyboard.press("ArrowRight")
    keyed = view_box(drawing.get_attribute("viewBox") or "")
    assert keyed[0] == pytest.approx(panned[0] + panned[2] * 0.1, abs=0.05)
    page.keyboard.press("0")
    assert drawing.get_attribute("viewBox") == whole
    page.keyboard.press("+")
    assert view_box(drawing.get_attribute("viewBox") or "")[2] == pytest.approx(w / 1.25, rel=1e-3)
    page.click("#path-output .zoom-fit")
    assert drawing.get_attribute("viewBox") == whole

    # Each path on its own: Next highlights another, each a real path from ALICE to Domain
    # Admins, the rest dimmed; All shows them all again.
    total = count_shortest_paths(answer, start_key, end_key)
    assert total > 50, total
    position = page.locator("#path-output .path-position")
    expect(position).to_contain_text("All 50 paths")
    expect(position).to_contain_text(f"{total:,} shortest paths")
    steps = distance[end_key]
    seen: set[tuple[int, ...]] = set()
    for number in range(1, 6):
        page.click("#path-output .path-next")
        expect(position).to_contain_text(f"Path {number} of 50")
        state = drawing.evaluate(DRAWN_STATE)
        lit = [e for e in state["edges"] if "on-path" in e["classes"].split()]
        assert len(lit) == steps
        chain = sorted(lit, key=lambda e: distance[answer["edges"][e["index"]]["source"]])
        assert chain[0]["from"] == start and chain[-1]["to"] == end
        assert all(a["to"] == b["from"] for a, b in itertools.pairwise(chain))
        for e in chain:
            edge = answer["edges"][e["index"]]
            assert (answer["nodes"][edge["source"]]["objectId"], edge["kind"]) == (
                e["from"],
                e["kind"],
            )
        seen.add(tuple(sorted(e["index"] for e in lit)))
        assert len(seen) == number  # another path each time
        assert all(e["opacity"] < 0.5 for e in state["edges"] if e not in lit)
        lit_nodes = {e["from"] for e in lit} | {e["to"] for e in lit}
        assert {n["objectId"] for n in state["nodes"] if n["opacity"] == 1} == lit_nodes
        steps_text = page.inner_text("#path-output .path-steps")
        assert (
            steps_text.startswith("ALICE@MANY.LOCAL") and "DOMAIN ADMINS@MANY.LOCAL" in steps_text
        )
    console.shoot("paths-60-nodes-one-path", "#path-output figure")
    page.click("#path-output .path-previous")
    expect(position).to_contain_text("Path 4 of 50")
    page.click("#path-output .path-all")
    expect(position).to_contain_text("All 50 paths")
    assert drawing.locator(".edge.on-path").count() == 0

    # The kinds, with their counts; one unchecked hides exactly its edges.
    counts = Counter(e["kind"] for e in answer["edges"])
    offered = page.locator("#path-output .kind-filter label").all_inner_texts()
    assert sorted(t.strip() for t in offered) == sorted(f"{k} ({n})" for k, n in counts.items())
    page.uncheck("#path-output .kind-filter input[value=GenericAll]")
    state = drawing.evaluate(DRAWN_STATE)
    hidden = {e["index"] for e in state["edges"] if e["hidden"]}
    assert hidden == {i for i, e in enumerate(answer["edges"]) if e["kind"] == "GenericAll"}
    assert not any("unreachable" in n["classes"] for n in state["nodes"])  # MemberOf still
    page.uncheck("#path-output .kind-filter input[value=MemberOf]")
    state = drawing.evaluate(DRAWN_STATE)
    hidden = {e["index"] for e in state["edges"] if e["hidden"]}
    gone = frozenset({"GenericAll", "MemberOf"})
    assert hidden == {i for i, e in enumerate(answer["edges"]) if e["kind"] in gone}
    # With neither kind no path is left: every node but the two ends dimmed.
    dimmed = {n["key"] for n in state["nodes"] if "unreachable" in n["classes"]}
    assert dimmed == set(answer["nodes"]) - {start_key, end_key}
    expect(position).to_have_text("No path with the kinds shown")
    page.check("#path-output .kind-filter input[value=GenericAll]")
    state = drawing.evaluate(DRAWN_STATE)
    hidden = {e["index"] for e in state["edges"] if e["hidden"]}
    assert hidden == {i for i, e in enumerate(answer["edges"]) if e["kind"] == "MemberOf"}
    gone = frozenset({"MemberOf"})
    forward = distances_over(answer, [start_key], hidden=gone)
    backward = distances_over(answer, [end_key], backward=True, hidden=gone)
    dimmed = {n["key"] for n in state["nodes"] if "unreachable" in n["classes"]}
    assert dimmed == set(answer["nodes"]) - (set(forward) & set(backward)) - {end_key}
    assert 0 < len(dimmed) < len(answer["nodes"]) - 2
    left = count_shortest_paths(answer, start_key, end_key, hidden=gone)
    expect(position).to_contain_text(f"All {min(left, 50)} paths")
    console.shoot("paths-60-nodes-kinds", "#path-output figure")

    # A node is a link to its page.
    drawing.locator(f".node[data-object-id='{end}'] a").click()
    page.wait_for_selector("h1.entity-name")
    assert page.url.endswith(f"/entity/groups/{end}")
