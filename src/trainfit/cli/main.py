"""trainfit's command line. Thin: parse, build the spec, call the core, render."""

from __future__ import annotations

import sys

import typer

from trainfit.cli import accept_cmd, audit_cmd, calibrate_cmd, catalog_cmd, check_cmd, diagnose_cmd, export_cmd, fit_cmd, plan_cmd, record_cmd, serve_cmd, trace_cmd

app = typer.Typer(
    name="trainfit",
    help="Will this LLM post-training run fit, on how many cards of which kind, at what cost?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("plan")(plan_cmd.plan)
app.command("fit")(fit_cmd.fit)
app.command("export")(export_cmd.export)
app.command("trace")(trace_cmd.trace)
app.command("audit")(audit_cmd.audit)
app.command("check")(check_cmd.check)
app.command("record")(record_cmd.record)
app.command("diagnose")(diagnose_cmd.diagnose)
app.command("accept")(accept_cmd.accept)
app.command("serve")(serve_cmd.serve)
app.command("models")(catalog_cmd.models)
app.command("gpus")(catalog_cmd.gpus)
app.command("calibrate")(calibrate_cmd.calibrate)


def main(argv: list[str] | None = None) -> int:
    """Entry point: user errors become one line on stderr and exit code 2 (``--debug`` re-raises)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    if debug:
        args.remove("--debug")
    from trainfit.errors import TrainfitError

    try:
        # with standalone_mode=False, click returns the code of a typer.Exit instead of exiting
        rc = app(args=args, prog_name="trainfit", standalone_mode=False)
    except TrainfitError as exc:
        if debug:
            raise
        sys.stderr.write(f"trainfit: error: {exc}\n")
        return 2
    except ValueError as exc:  # a spec invariant that slipped past validation
        if debug:
            raise
        sys.stderr.write(f"trainfit: error: {exc}\n")
        return 2
    except Exception as exc:  # usage errors, exits and aborts of typer's (vendored) click
        code = getattr(exc, "exit_code", None)
        if hasattr(exc, "show") and isinstance(code, int):  # a usage error: one message, its exit code
            if debug:
                raise
            exc.show()
            return code
        if type(exc).__name__ == "Exit" and isinstance(code, int):
            return code
        if type(exc).__name__ == "Abort":
            return 130
        raise
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    sys.exit(main())
