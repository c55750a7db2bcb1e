"""The explain pages in a real browser: click a grad op, its forward op lights up; sub-blocks open; no errors.

Needs Debian's ``chromium`` and ``chromium-driver`` and the ``browser`` extra (selenium).
Screenshots are written to pytest's temporary directory (kept for the last runs).
"""
import time

import pytest

from gradgen.framework.tools.explain import explain_page

from tests.extras import require

from .browser import PAGE_LOAD_TIMEOUT, chromium_paths, headless_chromium
from .programs import deep_mlp, second_order_program, trained_example

try:
    import selenium  # noqa: F401  (the browser extra)
except ImportError:
    require("selenium", "pip install -e .[browser]", module_level=True)
require("chromium" if None in chromium_paths() else None, "apt-get install chromium chromium-driver",
        module_level=True)


def _open(driver, path):
    started = time.perf_counter()
    driver.get(path.as_uri())
    deadline = started + PAGE_LOAD_TIMEOUT
    while driver.execute_script("return [...document.querySelectorAll('.gradgen-explain')]"
                                ".every(p => p.dataset.ready === '1')") is not True:
        assert time.perf_counter() < deadline, "the page script never finished"
        time.sleep(0.05)
    return time.perf_counter() - started


def _severe(driver):
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def _highlighted(driver, page=0):
    return driver.execute_script("return [...document.querySelectorAll('.gradgen-explain')[arguments[0]]"
                                 ".querySelectorAll('.op.hl2')].map(e => e.dataset.op)", page)


def _op(driver, op_id, page=0):
    """The clickable text of op ``op_id`` on the ``page``-th explain page of the document."""
    pages = driver.find_elements("css selector", ".gradgen-explain")
    return pages[page].find_element("css selector", f'[data-op="{op_id}"] > div')


@pytest.mark.parametrize("name", ["mlp", "cnn", "rnn"])
def test_clicking_a_grad_op_highlights_its_forward_op(name, tmp_path):
    program = trained_example(name)
    page = tmp_path / f"{name}.html"
    page.write_text(explain_page(program), encoding="utf-8")
    grad_ops = [(i, op) for i, op in enumerate(program.global_block().ops) if op.forward_op is not None]
    with headless_chromium() as driver:
        _open(driver, page)
        for i, op in grad_ops[:3] + grad_ops[-2:]:
            fwd = program.global_block().ops.index(op.forward_op)
            _op(driver, f"b0o{i}").click()
            assert f"b0o{fwd}" in _highlighted(driver), (i, op.type)
            card = driver.find_element("css selector", f'[data-op="b0o{i}"]')
            assert "hl" in card.get_attribute("class").split()
        driver.find_element("css selector", ".v").click()
        assert driver.find_element("css selector", ".gg-facts").text.strip() != "Click an op or a var."
        assert _severe(driver) == []
        driver.save_screenshot(str(tmp_path / f"{name}.png"))


def test_sub_blocks_expand_and_their_ops_link(tmp_path):
    program = trained_example("rnn")
    page = tmp_path / "rnn.html"
    page.write_text(explain_page(program), encoding="utf-8")
    with headless_chromium() as driver:
        _open(driver, page)
        inner = _op(driver, "b4o10")  # relu_grad inside the gradient body block
        assert not inner.is_displayed()
        for block in (4,):
            driver.execute_script(f"document.querySelector('details[data-block=\"{block}\"] summary').click()")
        assert inner.is_displayed()
        inner.click()
        lit = _highlighted(driver)
        assert "b2o6" in lit  # the body's relu it differentiates
        assert "b4o9" in lit  # and the copy of it that block 4 recomputes, beside it
        assert _severe(driver) == []
        driver.save_screenshot(str(tmp_path / "rnn-open.png"))


def test_deep_and_second_order_pages_load(tmp_path):
    for name, program in (("mlp50", deep_mlp(50)), ("second", second_order_program())):
        page = tmp_path / f"{name}.html"
        page.write_text(explain_page(program, {"x": [64, 64]} if name == "mlp50" else None), encoding="utf-8")
        with headless_chromium() as driver:
            seconds = _open(driver, page)
            assert seconds < PAGE_LOAD_TIMEOUT
            assert driver.find_elements("css selector", ".gg-timeline polygon")
            assert _severe(driver) == []


def test_two_programs_in_one_notebook_stay_apart(tmp_path):
    """Jupyter puts every ``_repr_html_`` into one document: each page works on its own elements."""
    first, second = trained_example("mlp"), trained_example("cnn")
    page = tmp_path / "notebook.html"
    page.write_text("<!DOCTYPE html><html><body>" + first._repr_html_() + "<p>next cell</p>" + second._repr_html_()
                    + "</body></html>", encoding="utf-8")
    grad = next(i for i, op in enumerate(second.global_block().ops) if op.forward_op is not None)
    fwd = second.global_block().ops.index(second.global_block().ops[grad].forward_op)
    with headless_chromium() as driver:
        _open(driver, page)
        _op(driver, f"b0o{grad}", page=1).click()
        assert f"b0o{fwd}" in _highlighted(driver, page=1)
        assert _highlighted(driver, page=0) == []
        assert len(driver.find_elements("css selector", ".gg-timeline")) == 2
        assert _severe(driver) == []


_LINK_POINTS_OVER_CARDS = """
const root = document.querySelector('.gradgen-explain');
const links = root.querySelector('.gg-links');
links.style.pointerEvents = 'auto';
const lines = () => links.querySelectorAll('line, polyline');
const host = root.querySelector('.gg-ops').getBoundingClientRect();
const sel = root.querySelector('.op.hl').getBoundingClientRect();  // a probe line across the selected card's text
const probe = document.createElementNS('http://www.w3.org/2000/svg', 'polyline');
probe.setAttribute('points', [sel.left - host.left + 4, (sel.top + sel.bottom) / 2 - host.top,
                              sel.right - host.left - 4, (sel.top + sel.bottom) / 2 - host.top].join(' '));
probe.setAttribute('stroke', '#000');
links.appendChild(probe);
const cards = [...root.querySelectorAll('.op')].map(e => e.getBoundingClientRect()).filter(r => r.height > 0);
const inside = (x, y) => cards.some(r => x > r.left + 2 && x < r.right - 2 && y > r.top + 2 && y < r.bottom - 2);
const out = {lines: 0, samples: 0, over: []};
lines().forEach(p => { p.style.pointerEvents = 'stroke'; p.setAttribute('stroke-width', 6); });
const box = links.getBoundingClientRect();
lines().forEach(p => {
  out.lines++;
  const length = p.getTotalLength();
  for (let d = 0; d <= length; d += 3) {
    const at = p.getPointAtLength(d); const x = box.left + at.x; const y = box.top + at.y;
    if (!inside(x, y) || y < 0 || y > window.innerHeight) continue;
    out.samples++;
    const top = document.elementFromPoint(x, y);
    if (top && top.closest('.gg-links')) out.over.push([Math.round(x), Math.round(y)]);
  }
});
return out;
"""


def test_link_lines_run_under_the_op_cards_never_over_their_text(tmp_path):
    """Every link line, and a probe line drawn across the selected card, is hidden wherever it crosses a card."""
    program = trained_example("mlp")
    page = tmp_path / "mlp.html"
    page.write_text(explain_page(program), encoding="utf-8")
    grads = [i for i, op in enumerate(program.global_block().ops) if op.forward_op is not None]
    with headless_chromium() as driver:
        driver.set_window_size(1200, 2400)
        _open(driver, page)
        crossed = 0
        for i in grads:
            _op(driver, f"b0o{i}").click()
            found = driver.execute_script(_LINK_POINTS_OVER_CARDS)
            assert found["lines"] >= 2, i  # its links and the probe
            assert found["over"] == [], (i, found["over"][:5])  # a line painted over a card at these points
            crossed += found["samples"]
            driver.execute_script("document.querySelector('.gg-links').style.pointerEvents = 'none'")
        assert crossed > 0  # the probe lines crossed cards, so the check above looked at something
        assert _severe(driver) == []


_CHART = """
const chart = document.querySelector('.gg-timeline');
const ys = [];
chart.querySelectorAll('polygon').forEach(p => p.getAttribute('points').split(' ').forEach(pt => {
  const [x, y] = pt.split(',').map(Number); ys.push([x, y]);
}));
const topY = Math.min(...ys.map(p => p[1]));
const dashed = chart.querySelector('line[stroke-dasharray]');
const texts = [...chart.querySelectorAll('text')].map(t => t.textContent);
return {top_xs: ys.filter(p => Math.abs(p[1] - topY) < 1e-6).map(p => p[0]), peak_x: Number(dashed.getAttribute('x1')),
        texts: texts};
"""


@pytest.mark.parametrize("name", ["mlp", "cnn", "rnn"])
def test_the_peak_marker_stands_at_the_charts_highest_point_and_says_its_top(name, tmp_path):
    page = tmp_path / f"{name}.html"
    page.write_text(explain_page(trained_example(name)), encoding="utf-8")
    with headless_chromium() as driver:
        _open(driver, page)
        chart = driver.execute_script(_CHART)
        assert chart["peak_x"] in chart["top_xs"], chart
        peak = next(t for t in chart["texts"] if t.startswith("peak "))
        axis = next(t for t in chart["texts"] if "; top " in t)
        assert peak.removeprefix("peak ") == axis.split("; top ")[1]
        sentence = driver.find_element("css selector", ".gg-memory .sentence").text
        assert "temporarys" not in sentence and "staged updates" not in sentence.replace("staged updates (", "")
        assert _severe(driver) == []
