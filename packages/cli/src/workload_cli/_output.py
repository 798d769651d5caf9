r"""How the client commands write: data on stdout, messages on stderr (STYLE 18).

Three formats: ``table`` (rich tables; the default when stdout is a terminal), ``plain`` (tab-
separated text without escapes; the default otherwise) and ``json`` (the API's resources, which
parse into the SDK's models). ``NO_COLOR`` turns every ANSI style off.

Nothing a server sends reaches the terminal as a control: :func:`visible` writes C0 and C1
control characters (ESC, BEL, CSI …) and the bidirectional overrides as visible escapes
(``\x1b``, ``\u202e``) in every table, plain line and message, and JSON output escapes them
as ``\uXXXX`` (the same JSON value). A worker's error message cannot set the clipboard (OSC 52),
hide a link (OSC 8) or reorder what is shown (ADR 0023).
"""

from __future__ import annotations

import enum
import itertools
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table
from rich.text import Text

from workload_sdk import WorkloadError

__all__ = [
    "Column",
    "Output",
    "OutputFormat",
    "cell",
    "make_console",
    "status_style",
    "visible",
]

T = TypeVar("T")

_STATUS_STYLES = {
    "succeeded": "green",
    "failed": "red",
    "timed_out": "red",
    "canceled": "magenta",
    "interrupted": "magenta",
    "running": "cyan",
    "waiting_retry": "yellow",
    "waiting_approval": "yellow",
    "pending": "dim",
    "skipped": "dim",
    "queued": "dim",
    "active": "green",
    "gone": "dim",
    # approvals and drafts (SPEC §11)
    "approved": "green",
    "rejected": "red",
    "expired": "magenta",
    "generating": "cyan",
    "ready": "yellow",
    "invalid": "red",
}


class OutputFormat(enum.StrEnum):
    """The value of ``--output``."""

    TABLE = "table"
    PLAIN = "plain"
    JSON = "json"


def status_style(status: object) -> str:
    """The rich style of a run, task, attempt or worker status."""
    return _STATUS_STYLES.get(str(status), "")


def make_console(*, stderr: bool, environ: Mapping[str, str] | None = None) -> Console:
    """A console that never highlights or parses markup; no styles at all under ``NO_COLOR``."""
    env = os.environ if environ is None else environ
    no_color = env.get("NO_COLOR", "") != ""
    return Console(
        stderr=stderr,
        highlight=False,
        markup=False,
        emoji=False,
        # ``no_color`` alone still emits bold and dim; no color system emits no style at all.
        color_system=None if no_color else "auto",
        no_color=no_color,
    )


_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""What a terminal would act on: C0 but tab and newline, DEL, C1, and the bidi controls."""
_JSON_CONTROLS = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""What ``json.dumps(ensure_ascii=False)`` leaves as is of those (it escapes C0 itself)."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text: str) -> str:
    r"""``text`` with every control character but tab and newline written as an escape.

    ``ESC`` becomes ``\x1b``, a C1 ``CSI`` ``\x9b``, a right-to-left override ``\u202e``.
    """
    return _CONTROLS.sub(_escape, text)


def _json_text(data: Any, indent: int | None) -> str:
    text = json.dumps(data, indent=indent, ensure_ascii=False)
    return _JSON_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def cell(value: Any, *, empty: str = "-", human: bool = False) -> str:
    """One value as text: JSON for objects and lists, ``empty`` for None; controls escaped.

    Timestamps are RFC 3339 in UTC as the API sends them, or (``human``) to the second.
    """
    return visible(_text(value, empty=empty, human=human))


def _text(value: Any, *, empty: str = "-", human: bool = False) -> str:
    if value is None:
        return empty
    if isinstance(value, datetime):
        utc = value.astimezone(UTC)
        if human:
            return f"{utc:%Y-%m-%d %H:%M:%S}"
        return utc.isoformat().replace("+00:00", "Z")
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


@dataclass(frozen=True, slots=True)
class Column(Generic[T]):
    """One column of a listing: a header, the cell's value, and optionally its style."""

    header: str
    value: Callable[[T], Any]
    style: Callable[[T], str] | None = None
    width: int = 0
    """The column's width when rows are streamed as text (0: as wide as the header)."""
    no_wrap: bool = False
    """Whether a table must keep this column's text on one line (run ids)."""


class Output:
    """The chosen format, and the stdout and stderr consoles."""

    def __init__(self, fmt: OutputFormat, stdout: Console, stderr: Console) -> None:
        self.format = fmt
        self.stdout = stdout
        self.stderr = stderr

    @classmethod
    def create(
        cls, requested: OutputFormat | None, environ: Mapping[str, str] | None = None
    ) -> Output:
        """The output for ``--output`` (None: table on a terminal, plain text otherwise)."""
        stdout = make_console(stderr=False, environ=environ)
        stderr = make_console(stderr=True, environ=environ)
        fmt = requested or (OutputFormat.TABLE if stdout.is_terminal else OutputFormat.PLAIN)
        return cls(fmt, stdout, stderr)

    @property
    def is_json(self) -> bool:
        """Whether the output is machine-readable JSON."""
        return self.format is OutputFormat.JSON

    # -- data (stdout) ---------------------------------------------------------------------

    def echo(self, text: str) -> None:
        """One line of data (not through rich, which would expand tabs); controls escaped."""
        typer.echo(visible(text))

    def json(self, data: Any, *, indent: int | None = 2) -> None:
        r"""A JSON document on stdout (control characters escaped as ``\uXXXX``)."""
        typer.echo(_json_text(data, indent))

    def resource(self, model: BaseModel) -> None:
        """One resource: a JSON object, ``field<TAB>value`` lines, or a two-column table."""
        data = model.model_dump(mode="json")
        if self.format is OutputFormat.JSON:
            self.json(data)
        elif self.format is OutputFormat.PLAIN:
            for name, value in data.items():
                self.echo(f"{name}\t{_field(value)}")
        else:
            grid = Table.grid(padding=(0, 2))
            grid.add_column(style="bold")
            grid.add_column(overflow="fold")
            for name, value in data.items():
                if name == "usage" and isinstance(value, dict):
                    # An agent's usage as its non-zero counts; a run without agents has none.
                    text = " ".join(f"{k}={n}" for k, n in value.items() if n)
                    if not text:
                        continue
                elif isinstance(value, dict) and value and name in {"definition", "output"}:
                    text = _json_text(value, 2)
                else:
                    text = cell(value)
                style = status_style(value) if name == "status" else ""
                grid.add_row(name, Text(text, style=style))
            self.stdout.print(grid)

    def fields(self, rows: Iterable[tuple[str, Any]]) -> None:
        """Named values, as :meth:`resource` writes them: ``name<TAB>value`` lines, or a grid.

        For a view of its own (``drafts show``); JSON output writes the resource instead.
        """
        if self.format is not OutputFormat.TABLE:
            for name, value in rows:
                self.echo(f"{name}\t{_field(value)}")
            return
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column(overflow="fold")
        for name, value in rows:
            style = status_style(value) if name == "status" else ""
            grid.add_row(name, Text(cell(value), style=style))
        self.stdout.print(grid)

    def listing(self, items: Iterable[T], columns: Sequence[Column[T]]) -> None:
        """Items of one kind: a JSON array, tab-separated rows with a header, or a table.

        The first page is read before anything is written, so a listing that fails at once
        (an unknown run) leaves standard output empty.
        """
        iterator = iter(items)
        first = list(itertools.islice(iterator, 1))
        items = itertools.chain(first, iterator)
        if self.format is OutputFormat.JSON:
            self.json([_dump(item) for item in items])
            return
        if self.format is OutputFormat.PLAIN:
            self.echo("\t".join(c.header for c in columns))
            for item in items:  # streamed: a long listing shows up page by page
                self.echo("\t".join(_field(c.value(item)) for c in columns))
            return
        table = Table(box=None, header_style="bold", pad_edge=False)
        for column in columns:
            table.add_column(column.header, overflow="fold", no_wrap=column.no_wrap)
        for item in items:
            table.add_row(
                *(
                    Text(cell(c.value(item), human=True), style=c.style(item) if c.style else "")
                    for c in columns
                )
            )
        self.stdout.print(table)

    def stream(self, columns: Sequence[Column[T]]) -> Callable[[T], None]:
        """A writer of one row at a time, for listings that grow (``events --follow``).

        JSON writes one object per line (JSON Lines); plain writes tab-separated rows after a
        header; table writes aligned, styled rows after a header.
        """
        if self.format is OutputFormat.JSON:
            return lambda item: self.json(_dump(item), indent=None)
        if self.format is OutputFormat.PLAIN:
            self.echo("\t".join(c.header for c in columns))
            return lambda item: self.echo("\t".join(cell(c.value(item), empty="") for c in columns))
        widths = [max(c.width, len(c.header)) for c in columns]
        header = " ".join(c.header.ljust(w) for c, w in zip(columns, widths, strict=True))
        self.stdout.print(Text(header.rstrip(), style="bold"), soft_wrap=True)

        def write(item: T) -> None:
            line = Text()
            for column, width in zip(columns, widths, strict=True):
                text = cell(column.value(item), human=True)
                line.append(text.ljust(width), style=column.style(item) if column.style else "")
                line.append(" ")
            line.rstrip()
            self.stdout.print(line, soft_wrap=True)

        return write

    # -- messages (stderr) -----------------------------------------------------------------

    def say(self, message: str, *, style: str = "") -> None:
        """A message for the human at the terminal (controls escaped)."""
        self.stderr.print(Text(visible(message), style=style), soft_wrap=True)

    def problem(self, error: WorkloadError, *, keyed: bool = True) -> None:
        """An SDK error with the problem's ``detail`` and ``request_id``.

        ``keyed``: the command takes ``--idempotency-key``, so a write whose answer was lost is
        said with its key, to repeat it safely (a command without the option says nothing of it).
        """
        if self.is_json:
            typer.echo(_json_text(_problem(error), None), err=True)
            return
        head = " ".join(str(part) for part in (error.status, error.code) if part is not None)
        self.say(f"error: {error.detail}" + (f" ({head})" if head else ""), style="red")
        for item in error.errors:
            self.say(f"  {item.path or '/'}: {item.message}")
        if error.request_id:
            self.say(f"request_id: {error.request_id}")
        if keyed and error.idempotency_key and error.status is None:
            self.say(
                f"idempotency key: {error.idempotency_key} (retry with --idempotency-key "
                "to repeat this write safely)"
            )


_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _field(value: Any) -> str:
    r"""A value as one tab-separated field: empty for None; controls escaped.

    Backslash, tab and newlines with a backslash (``\t``); any other as :func:`visible`.
    """
    return visible(_text(value, empty="").translate(_ESCAPES))


def _dump(item: Any) -> Any:
    return item.model_dump(mode="json") if isinstance(item, BaseModel) else item


def _problem(error: WorkloadError) -> dict[str, Any]:
    return {
        "status": error.status,
        "code": error.code,
        "detail": error.detail,
        "request_id": error.request_id,
        "errors": [item.model_dump(mode="json") for item in error.errors],
        "idempotency_key": error.idempotency_key,
    }
