"""What one client command runs with: the resolved config, an SDK client, and the output.

:func:`session` is the client commands' only way to the server. It also turns every failure
into a message on stderr and a documented exit code (see :mod:`workload_cli._exit`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import typer

from workload_cli._config import ClientConfig, ConfigError, resolve_config
from workload_cli._exit import ExitCode, exit_code_for_error
from workload_cli._output import Output, OutputFormat
from workload_sdk import Client, WorkloadError

__all__ = ["GlobalOptions", "Session", "UsageError", "global_options", "session"]


@dataclass(frozen=True, slots=True)
class GlobalOptions:
    """The options given before the command (``workload --url … runs list``)."""

    url: str | None = None
    token: str | None = None
    output: OutputFormat | None = None


class UsageError(Exception):
    """A problem with what the user typed or gave as a file; exits 2."""


class Session:
    """The output and (resolved on first use) the config and SDK client of one command."""

    def __init__(self, options: GlobalOptions, output: Output) -> None:
        self._options = options
        self.out = output
        self._client: Client | None = None

    @property
    def config(self) -> ClientConfig:
        """Where to connect and with which token (flag > env > credentials file).

        Raises:
            UsageError: the configured URL cannot work.
        """
        try:
            return resolve_config(url=self._options.url, token=self._options.token)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None

    @property
    def client(self) -> Client:
        """The SDK client (created on first use; commands that need no server never make one)."""
        if self._client is None:
            config = self.config
            self._client = Client(base_url=config.url, token=config.token)
        return self._client

    def close(self) -> None:
        """Close the client's connections."""
        if self._client is not None:
            self._client.close()


def global_options(ctx: typer.Context) -> GlobalOptions:
    """The options of the root command (defaults when a sub-app runs on its own)."""
    root = ctx.find_root().obj
    return root if isinstance(root, GlobalOptions) else GlobalOptions()


@contextmanager
def session(ctx: typer.Context, output: OutputFormat | None = None) -> Iterator[Session]:
    """Run a client command: yield its session, then map failures to exit codes.

    Args:
        ctx: The command's context (for the global options).
        output: The command's own ``--output``, which wins over the global one.
    """
    options = global_options(ctx)
    out = Output.create(output or options.output)
    current = Session(options, out)
    try:
        yield current
    except WorkloadError as exc:
        out.problem(exc)
        raise typer.Exit(exit_code_for_error(exc)) from None
    except UsageError as exc:
        out.say(f"error: {exc}", style="red")
        raise typer.Exit(ExitCode.USAGE) from None
    except KeyboardInterrupt:
        out.say("interrupted")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    finally:
        current.close()
