"""The viewer page in a real browser (headless Chromium over DevTools): the DOM after the
scripts ran has one node element per trace node with the chosen path marked, a real mouse click
on a node shows its full text escaped and intact, the vote panel lists the trace's answers, and
a run index sorts and links to its trees. Skips, saying why, where Chromium is not installed
(Debian: `apt-get install chromium`). Screenshots go to $SEED_TOT_TEST_SCREENSHOTS, else to the
test's temporary directory."""

import os
from pathlib import Path

import pytest
from browser import Browser, find_chromium
from viewer_helpers import ODD_THOUGHT, crowded_run, viewer_trace, wide_trace, write_run

from seed_tot.observe.html_view import write_view
from seed_tot.observe.trace import write_trace
from seed_tot_tasks import bundled_task

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium on PATH: install Debian's chromium package to run the viewer's browser test"
)


def screenshot_dir(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("SEED_TOT_TEST_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def browser(tmp_path):
    with Browser(CHROMIUM, tmp_path / "profile") as opened:
        yield opened


def test_tree_page_in_chromium(tmp_path, browser, record_property):
    trace = viewer_trace()
    page = write_view(write_trace(tmp_path / "trace.json", trace), tmp_path / "trace.html", bundled_task)
    browser.open(page.as_uri(), ready="document.querySelector('svg#tree g.node')")

    drawn = browser.evaluate("[...document.querySelectorAll('svg#tree g.node')].map(g => +g.dataset.id)")
    assert sorted(drawn) == sorted(n.id for n in trace.nodes)
    chosen = browser.evaluate("[...document.querySelectorAll('svg#tree g.node.chosen')].map(g => +g.dataset.id)")
    assert sorted(chosen) == trace.chosen_path
    assert browser.evaluate("document.querySelectorAll('svg#tree path.edge.chosen').length") == len(trace.chosen_path) - 1
    assert browser.evaluate("[...document.querySelectorAll('g.node.cot')].map(g => +g.dataset.id)") == [9, 10]
    assert browser.evaluate("[...document.querySelectorAll('#vote tr.vote-row')].map(r => r.dataset.answer)") == ["18", "20"]

    # a real click on the node with the odd text shows it whole, as text, and runs none of it
    browser.click('svg#tree g.node[data-id="4"]')
    assert browser.evaluate("document.querySelector('#detail-thought') && document.querySelector('#detail-thought').textContent") == ODD_THOUGHT
    assert browser.evaluate("document.querySelectorAll('b.injected, img[src=x]').length") == 0
    assert browser.evaluate("typeof window.__viewer_pwned") == "undefined"
    assert browser.evaluate("document.querySelector('svg#tree g.node.active').dataset.id") == "4"

    # clicking a node link in the vote panel selects that node
    browser.click("#vote tr.vote-row:nth-of-type(3) .node-link")
    assert browser.evaluate("document.querySelector('#detail-thought').textContent") == trace.nodes[10].thought

    # collapsing a subtree hides its nodes and expanding shows them again
    browser.click('svg#tree g.node[data-id="1"] > g.toggle')
    assert sorted(browser.evaluate("[...document.querySelectorAll('svg#tree g.node')].map(g => +g.dataset.id)")) == [0, 1, 2, 9, 10]
    browser.click('svg#tree g.node[data-id="1"] > g.toggle')
    assert browser.evaluate("document.querySelectorAll('svg#tree g.node').length") == len(trace.nodes)

    shot = browser.screenshot(screenshot_dir(tmp_path) / "viewer-tree.png")
    record_property("screenshot", str(shot))
    assert shot.stat().st_size > 10_000


def test_run_index_in_chromium(tmp_path, browser, record_property):
    page = write_view(write_run(tmp_path), tmp_path / "index.html", bundled_task)
    browser.open(page.as_uri(), ready="document.querySelector('#run-table tr.problem')")
    rows = "[...document.querySelectorAll('#run-table tr.problem')].map(r => r.dataset.problem)"
    assert browser.evaluate(rows) == ["gsm8k-viewer", "gsm8k-lost", "gsm8k-other"]
    browser.click('#run-table th[data-key="new_tokens"]')
    assert browser.evaluate(rows) == ["gsm8k-lost", "gsm8k-viewer", "gsm8k-other"]  # 90, 120, then the trace's 120
    browser.click('#run-table th[data-key="new_tokens"]')
    assert browser.evaluate(rows) == ["gsm8k-viewer", "gsm8k-other", "gsm8k-lost"]
    shot = browser.screenshot(screenshot_dir(tmp_path) / "viewer-run.png")
    record_property("screenshot", str(shot))

    browser.click('#run-table tr[data-problem="gsm8k-other"] a')
    browser.wait("document.querySelectorAll('svg#tree g.node').length > 0")
    assert browser.evaluate("document.querySelectorAll('svg#tree g.node').length") == len(viewer_trace().nodes)
    assert browser.evaluate("document.querySelector('header h1').textContent") == "gsm8k · gsm8k-other"
    browser.click("header a.back")
    browser.wait("document.querySelectorAll('#run-table tr.problem').length === 3")


def test_big_tree_opens_on_the_chosen_path_and_expands_without_overlaps(tmp_path, browser, record_property):
    trace = wide_trace(branch=4, depth=4)  # 341 nodes
    page = write_view(write_trace(tmp_path / "big.json", trace), tmp_path / "big.html", bundled_task)
    browser.open(page.as_uri(), ready="document.querySelector('svg#tree g.node')")
    drawn = "[...document.querySelectorAll('svg#tree g.node')].map(g => +g.dataset.id)"
    expected = {0} | {n.id for n in trace.nodes if n.parent in trace.chosen_path}
    assert sorted(browser.evaluate(drawn)) == sorted(expected)  # every other subtree starts collapsed

    browser.click("button#expand-all")
    assert len(browser.evaluate(drawn)) == len(trace.nodes) == 341
    boxes = browser.evaluate(
        "[...document.querySelectorAll('svg#tree g.node')].map(g => { const r = g.querySelector('.shape').getBoundingClientRect();"
        " return [+g.dataset.id, r.left, r.right]; })"
    )
    depth = {n.id: n.depth for n in trace.nodes}
    for level in range(1, 5):
        row = sorted((left, right) for node, left, right in boxes if depth[node] == level)
        assert all(a[1] <= b[0] for a, b in zip(row, row[1:])), f"nodes overlap at depth {level}"
    shot = browser.screenshot(screenshot_dir(tmp_path) / "viewer-big.png")
    record_property("screenshot", str(shot))


def test_a_run_without_values_or_a_tree_prints_no_null(tmp_path, browser):
    """A self-consistency run: nothing rated, no search choice, settings left unset (None)."""
    trace = viewer_trace()
    for node in trace.nodes:
        node.value = None
    trace.search, trace.config["search"]["depth"] = "self-consistency", None
    trace.selection.update(search_answer=None, search_node_id=0)
    write_trace(tmp_path / "run" / "traces" / "gsm8k-viewer.json", trace)
    page = write_view(tmp_path / "run", tmp_path / "index.html", bundled_task)
    browser.open(page.as_uri(), ready="document.querySelector('#run-table tr.problem')")
    assert "null" not in browser.evaluate("document.body.innerText")
    browser.click('#run-table tr[data-problem="gsm8k-viewer"] a')
    browser.wait("document.querySelectorAll('svg#tree g.node').length > 0")
    legend = browser.evaluate("document.querySelector('.legend').textContent")
    assert "chain of thought" in legend and "value" not in legend
    text = browser.evaluate("document.body.innerText")
    assert "null" not in text and "Search's choice" not in text


def test_a_problem_that_shared_the_batch_shows_the_runs_speed_not_its_own(tmp_path, browser):
    page = write_view(crowded_run(tmp_path), tmp_path / "index.html", bundled_task)
    browser.open(page.as_uri(), ready="document.querySelector('#run-table tr.problem')")
    assert "4.0 tokens/s" in browser.evaluate("document.querySelector('header #speed').textContent")
    assert "tokens/s" not in browser.evaluate("document.querySelector('#run-table tr').textContent")
    browser.click('#run-table tr[data-problem="gsm8k-3"] a')
    browser.wait("document.querySelectorAll('svg#tree g.node').length > 0")
    speed = browser.evaluate("document.querySelector('header #speed').textContent")
    assert "120 tokens · 300 s in executor calls, sharing the batch with other problems" in speed
    assert "run: 4.0 tokens/s (1,200 tokens of 10 problems" in speed and "0.4" not in speed
