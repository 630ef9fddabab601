"""The Typer application and the registry of its commands.

Each command lives in its own module (``cli/<command>.py``) exposing one function; this
module only wires them in. Command modules import heavy dependencies (torch, matplotlib,
uvicorn) inside the function so ``gpubalance --help`` stays fast.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="gpubalance",
    help="Keep GPU work balanced and GPU fleets right-sized for AI inference.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)

# --- command registration, in the order `--help` lists them ------------------------
from gpubalance.cli import audit as audit_cmd  # noqa: E402
from gpubalance.cli import calibrate as calibrate_cmd  # noqa: E402
from gpubalance.cli import catalog as catalog_cmd  # noqa: E402
from gpubalance.cli import collectives as collectives_cmd  # noqa: E402
from gpubalance.cli import diagnose as diagnose_cmd  # noqa: E402
from gpubalance.cli import emulate as emulate_cmd  # noqa: E402
from gpubalance.cli import loadtest as loadtest_cmd  # noqa: E402
from gpubalance.cli import minilm_server as minilm_server_cmd  # noqa: E402
from gpubalance.cli import monitor as monitor_cmd  # noqa: E402
from gpubalance.cli import partition as partition_cmd  # noqa: E402
from gpubalance.cli import plan as plan_cmd  # noqa: E402
from gpubalance.cli import serve as serve_cmd  # noqa: E402

app.command("plan")(plan_cmd.plan)
app.command("catalog")(catalog_cmd.catalog)
app.command("partition")(partition_cmd.partition)
app.command("serve")(serve_cmd.serve)
app.command("emulate")(emulate_cmd.emulate)
app.command("loadtest")(loadtest_cmd.loadtest)
app.command("calibrate")(calibrate_cmd.calibrate)
app.command("minilm-server")(minilm_server_cmd.minilm_server)
app.command("diagnose")(diagnose_cmd.diagnose)
app.command("audit")(audit_cmd.audit)
app.command("collectives")(collectives_cmd.collectives)
app.command("monitor")(monitor_cmd.monitor)
