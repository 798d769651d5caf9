"""What one client command runs with: the resolved config, an SDK client, and the output.

:func:`session` is the client commands' only way to the server. It also turns every failure
into a message on stderr and a documented exit code (see :mod:`workload_cli._exit`). A client
command is written as a function of its session and its own options, made a typer command by
:func:`client_command` (which adds ``--url``, ``--token`` and ``--output`` and opens the
session).

Whoever invokes the CLI in-process (the tests, an embedding program) may hand it an
``httpx.BaseTransport`` as the root context's ``obj``: the SDK client then sends through it
instead of the network (e.g. to an application served in the same process).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx
import typer

from workload_cli._config import ClientConfig, ConfigError, Given, resolve_config
from workload_cli._exit import ExitCode, exit_code_for_error
from workload_cli._options import OutputOption, TokenOption, UrlOption, closest
from workload_cli._output import Output, OutputFormat
from workload_sdk import Client, WorkloadError
from workload_sdk.config import TOKEN_ENV, URL_ENV

__all__ = [
    "Connection",
    "Session",
    "UsageError",
    "client_command",
    "connection",
    "output_format",
    "resigned",
    "session",
]

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Connection:
    """The server and token given by a flag or the environment (None: not given)."""

    url: Given | None = None
    token: Given | None = None


class UsageError(Exception):
    """A problem with what the user typed or gave as a file; exits 2."""


class Session:
    """The output and (resolved on first use) the config and SDK client of one command."""

    def __init__(
        self,
        connection: Connection,
        output: Output,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._connection = connection
        self.out = output
        self._transport = transport
        self._client: Client | None = None

    @property
    def config(self) -> ClientConfig:
        """Where to connect and with which token (flag > env > credentials file).

        Raises:
            UsageError: the configured URL cannot work.
        """
        try:
            return resolve_config(url=self._connection.url, token=self._connection.token)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None

    @property
    def client(self) -> Client:
        """The SDK client (created on first use; commands that need no server never make one)."""
        if self._client is None:
            config = self.config
            try:
                self._client = Client(
                    base_url=config.url, token=config.token, transport=self._transport
                )
            except ValueError as exc:  # the configuration it was given (a token it cannot send)
                raise UsageError(f"text that cannot be sent: {exc}") from None
        return self._client

    def close(self) -> None:
        """Close the client's connections."""
        if self._client is not None:
            self._client.close()


def _given(ctx: typer.Context, name: str, value: str | None, flag: str, env: str) -> Given | None:
    found = closest(ctx, name, value)
    if found is None:
        return None
    given, from_env = found
    return Given(given, env if from_env else flag)


def connection(ctx: typer.Context, url: str | None = None, token: str | None = None) -> Connection:
    """The ``--url`` / ``--token`` that win: after the command, else before it, else the env.

    Args:
        ctx: The command's context.
        url: The command's own ``--url``.
        token: The command's own ``--token``.
    """
    return Connection(
        url=_given(ctx, "url", url, "--url", URL_ENV),
        token=_given(ctx, "token", token, "--token", TOKEN_ENV),
    )


def output_format(ctx: typer.Context, output: OutputFormat | None = None) -> OutputFormat | None:
    """The ``--output`` that wins (as :func:`connection`); None: the default for the terminal.

    Args:
        ctx: The command's context.
        output: The command's own ``--output``.
    """
    found = closest(ctx, "output", output)
    return None if found is None else found[0]


@contextmanager
def session(
    ctx: typer.Context,
    output: OutputFormat | None = None,
    *,
    url: str | None = None,
    token: str | None = None,
) -> Iterator[Session]:
    """Run a client command: yield its session, then map failures to exit codes.

    The options given after the command win over those given before it, which win over the
    environment (see :func:`workload_cli._options.closest`).

    Args:
        ctx: The command's context (for the options given before the command).
        output: The command's own ``--output``.
        url: The command's own ``--url``.
        token: The command's own ``--token``.
    """
    out = Output.create(output_format(ctx, output))
    given = ctx.find_root().obj
    transport = given if isinstance(given, httpx.BaseTransport) else None
    current = Session(connection(ctx, url, token), out, transport)
    try:
        yield current
    except WorkloadError as exc:
        out.problem(exc, keyed=any(p.name == "idempotency_key" for p in ctx.command.params))
        raise typer.Exit(exit_code_for_error(exc)) from None
    except UsageError as exc:
        out.say(f"error: {exc}", style="red")
        raise typer.Exit(ExitCode.USAGE) from None
    except UnicodeError as exc:
        # An argument or a file that is not UTF-8 (the shell passes bytes as surrogates), or a
        # token that is not ASCII: a usage error, not a traceback.
        out.say(
            f"error: text that cannot be sent ({exc}): arguments and files must be UTF-8, "
            "tokens ASCII",
            style="red",
        )
        raise typer.Exit(ExitCode.USAGE) from None
    except KeyboardInterrupt:
        out.say("interrupted")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    finally:
        current.close()


_CONTEXT = inspect.Parameter(
    "ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context
)
_CONNECTION = [
    inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=option)
    for name, option in (("url", UrlOption), ("token", TokenOption), ("output", OutputOption))
]


def client_command(command: Callable[Concatenate[Session, P], None]) -> Callable[..., None]:
    """A client command run in a :func:`session`, for ``typer``'s ``command()``.

    The command takes the session first, then its own arguments and options; the callable
    returned takes the context first, then those, then ``--url``, ``--token`` and ``--output``
    (its signature says so, for typer to read), and runs the command in the session they open.
    """

    @functools.wraps(command)
    def run(
        ctx: typer.Context,
        *args: Any,
        url: str | None = None,
        token: str | None = None,
        output: OutputFormat | None = None,
        **kwargs: Any,
    ) -> None:
        with session(ctx, output, url=url, token=token) as current:
            command(current, *args, **kwargs)

    return resigned(run, command, first=_CONTEXT, last=_CONNECTION)


def resigned(
    wrapper: Callable[..., T],
    command: Callable[..., Any],
    *,
    first: inspect.Parameter,
    last: Sequence[inspect.Parameter],
) -> Callable[..., T]:
    """``wrapper``, its signature (which typer reads) ``command``'s, changed at both ends.

    The first parameter is ``first`` instead of ``command``'s; ``last`` follows the others.
    """
    own = list(inspect.signature(command, eval_str=True).parameters.values())[1:]
    signature = inspect.Signature([first, *own, *last], return_annotation=None)
    wrapper.__signature__ = signature  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
    return wrapper
