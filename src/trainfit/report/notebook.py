"""A plan in a notebook cell: the verdict, the key figures and the HTML report's chart.

``Plan._repr_html_`` calls :func:`plan_notebook_html`. The chart is the same SVG the report and
``trainfit serve`` draw (``trainfit.report.html.plan_svg`` of ``chart_model``); styles are inline,
so the cell needs no stylesheet and no network. No arithmetic here.
"""

from __future__ import annotations

from html import escape
from typing import Any

from trainfit.units import GIB


def plan_notebook_html(plan: Any) -> str:
    from trainfit.report.html import FONT, chart_model, plan_svg

    model = chart_model(plan)
    fits = plan.fits
    peak = plan.peak
    head = plan.headroom_bytes
    color = "#1a7f37" if fits else "#c62828"
    facts = [
        f"peak {peak.device / GIB:.2f} GiB per GPU in {escape(peak.phase.value)} ({escape(peak.at)})",
        f"of {plan.capacity_bytes / GIB:.2f} GiB ({escape(plan.capacity_label)})",
        f"{'headroom' if head >= 0 else 'over by'} {abs(head) / GIB:.2f} GiB",
    ]
    if plan.step_seconds:
        facts.append(f"step {plan.step_seconds:.2f} s")
    if plan.cost_per_hour is not None:
        facts.append(f"{plan.cost_per_hour:.2f} {escape(plan.price.currency)}/h")
    reason = ""
    if not fits and head >= 0 and plan.rollout is not None and not plan.rollout.engine_fits:
        reason = f'<div style="color:{color}">the rollout engine cannot start: {escape(plan.rollout.reason)}</div>'
    return (
        f'<div class="trainfit-plan" style="font-family:{FONT};max-width:980px">'
        f'<div style="font-size:15px;margin:4px 0"><b style="color:{color}">{"FITS" if fits else "DOES NOT FIT"}</b>'
        f" &nbsp;{escape(model['title'])}</div>"
        f'<div style="font-size:13px;color:#444;margin-bottom:6px">{"; ".join(facts)}</div>'
        f"{reason}{plan_svg(model)}"
        '<div style="font-size:12px;color:#666">GiB = 2^30 bytes. <code>plan.to_dict()</code>: the numbers;'
        " <code>trainfit.report.html.write_plan_html(plan, path)</code>: the full report.</div></div>"
    )
