"""Reports: read run directories (never a server) and render frames, heatmaps and HTML.

render_report(run_dir) writes run_dir/report.html (self-contained) and heatmap-<suite>.png files.
"""

from reports.html import render_report

__all__ = ["render_report"]
