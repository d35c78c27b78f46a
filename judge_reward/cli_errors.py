"""How the ``judge-reward`` commands report a user's mistake.

A mistake (a bad config field, an unknown aspect or method, a missing or malformed input file) is
printed as one line on stderr, ``error: <file>:<line>: <field>: <value> ...``, and the command exits
with status 2, without a traceback; ``judge-reward --debug <command> ...`` shows the traceback.
Commands raise :class:`UserError` (or :class:`~judge_reward.aspects.ConfigError`) and are wrapped
in :func:`user_errors`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys

import typer
from typer._click.exceptions import ClickException, NoArgsIsHelpError
from typer.exceptions import Abort
from typer.core import TyperGroup

from .aspects import ConfigError

EXIT_USAGE = 2


class UserError(ValueError):
    """A mistake in what the user gave a command; the message names the file, line, field and value."""


_debug = False  # set by the app's callback just before its command runs; the command takes it


def debug_option(
    debug: bool = typer.Option(False, "--debug", help="show the full traceback of an error"),
) -> None:
    """The top-level app's callback: ``--debug`` is handed to the command that runs next."""
    global _debug
    _debug = debug


def fail(message: object) -> None:
    """Print ``error: <message>`` on stderr and exit with status 2."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(EXIT_USAGE)


def user_errors(command):
    """Wrap a command so a :class:`UserError` or :class:`ConfigError` ends it with one line and exit 2."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        global _debug
        debug, _debug = _debug, False
        try:
            return command(*args, **kwargs)
        except (UserError, ConfigError) as err:
            if debug:
                raise
            fail(err)

    return run


class OneLineUsageErrors(TyperGroup):
    """The app's command group: a usage mistake Typer catches itself (an option value of the wrong
    type, an unknown option, a missing argument) is one line on stderr too, ``error: ...``, exit 2,
    instead of Typer's boxed usage panel; a bare command still shows its help."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode: bool = True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            # not standalone: Typer returns an Exit's code and raises click's exceptions to us
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except NoArgsIsHelpError as err:
            err.show()
            sys.exit(err.exit_code)
        except ClickException as err:
            command = f"{err.ctx.command_path} --help" if getattr(err, "ctx", None) is not None else "--help"
            typer.echo(f"error: {err.format_message().rstrip('.')} (see {command})", err=True)
            sys.exit(err.exit_code)
        except Abort:
            typer.echo("Aborted.", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) and not isinstance(code, bool) else 0)


def check_output_file(path, option: str) -> None:
    """An output file's path (``-``: stdout) is usable: its folder exists and it is not a folder."""
    if str(path) != "-" and not path.parent.is_dir():
        raise UserError(f"{option} {path}: the folder {path.parent} does not exist")
    if path.is_dir():
        raise UserError(f"{option} {path}: is a folder, not a file")


def check_output_folder(path, option: str, holds: str) -> None:
    """An output folder's path is not an existing file (``holds``: what goes in it, for the message)."""
    if path.exists() and not path.is_dir():
        raise UserError(f"{option} {path}: is a file, not a folder ({holds} go in it)")


@contextlib.contextmanager
def backend_options(**given):
    """Report a bad backend field that came from a command-line option (``--model``, ``--device``,
    ``--batch-size`` ...) under that option, not under the config file it was written into."""
    try:
        yield
    except ConfigError as err:
        for key, (option, value) in given.items():
            if value is not None and err.field == f"backend.{key}":
                raise UserError(f"{option} {value}: {err.problem}") from None
        raise


def read_text_lines(path, what: str = "input"):
    """``(line number, text)`` of a UTF-8 text file (``-``: stdin), with mistakes as :class:`UserError`:
    a missing file, a folder, or bytes that are not UTF-8 (named by line and column)."""
    if str(path) == "-":
        fh = contextlib.nullcontext(sys.stdin.buffer)
    else:
        try:
            fh = open(path, "rb")
        except FileNotFoundError:
            raise UserError(f"{path}: no such {what} file") from None
        except IsADirectoryError:
            raise UserError(f"{path}: is a folder, not a {what} file") from None
        except PermissionError:
            raise UserError(f"{path}: permission denied") from None
    with fh as lines:
        for n, raw in enumerate(lines, 1):
            try:
                yield n, raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise UserError(
                    f"{path}:{n}: not valid UTF-8 (byte 0x{raw[err.start]:02x} at column {err.start + 1})"
                ) from None


def read_json_lines(path, what: str = "input"):
    """``(line number, value)`` of each non-blank line of a JSONL file (``-``: stdin); a line that is
    not JSON is a :class:`UserError` naming the file, line and column."""
    for n, line in read_text_lines(path, what):
        if not line.strip():
            continue
        try:
            yield n, json.loads(line)
        except json.JSONDecodeError as err:
            raise UserError(f"{path}:{n}: not valid JSON ({err.msg} at column {err.colno})") from None
