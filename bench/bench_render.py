#!/usr/bin/env python
"""What choosing a drain's items costs, against rendering the chosen items once.

Run from the project root:

    python bench/bench_render.py

`inbox.render.fit` picks the items that fit the hook's context cap and renders their block.
The baseline, measured in the same run, is one `render` of the items it chose: the figure is
how many renders' worth fit costs, for backlogs of 20 (the default `delivery.max_items`),
100 and 300 items. Always exits 0 (it is a report).
"""

from __future__ import annotations

import time

from inbox.items import Item
from inbox.render import MAX_CONTEXT_CHARS, fit, render

ROUNDS = 30


def per_call(function: object, *args: object) -> float:
    """Seconds per call of `function(*args)`, best of three batches of ROUNDS."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(ROUNDS):
            function(*args)  # type: ignore[operator]
        best = min(best, (time.perf_counter() - started) / ROUNDS)
    return best


def main() -> None:
    print(f"fit vs one render of what it chose (cap {MAX_CONTEXT_CHARS} characters)")
    for count in (20, 100, 300):
        # Lengths vary so that the cap falls between items of different sizes.
        items = [Item("dog", f"k{n}", f"item {n:03d} " + "x" * (n * 7 % 61)) for n in range(count)]
        taken, _text = fit(items)
        choosing, once = per_call(fit, items), per_call(render, taken)
        print(
            f"  {count:3d} pending, {len(taken):3d} chosen: fit {choosing * 1000:6.2f} ms, "
            f"one render {once * 1000:5.2f} ms: {choosing / once:4.1f} renders"
        )


if __name__ == "__main__":
    main()
