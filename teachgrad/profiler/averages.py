"""``prof.key_averages()``: the events summed per name (and per input shapes), and the table.

Each row adds up every event with the same key: calls, total and self CPU time, total
and self CUDA time. The percentages are of the sum of *self* times over all rows, so
the "Self CPU %" column adds up to 100 %, as in PyTorch's table.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .events import FunctionEvent

SORT_KEYS = ("cpu_time_total", "self_cpu_time_total", "cuda_time_total", "self_cuda_time_total",
             "cpu_time", "cuda_time", "count")


@dataclass
class FunctionEventAvg:
    """One row of ``key_averages()`` (``torch.autograd.profiler_util.FunctionEventAvg``)."""

    key: str
    input_shapes: str = ""  #: set when grouped by input shapes
    device_type: str = "cpu"
    count: int = 0
    cpu_time_total: float = 0.0
    self_cpu_time_total: float = 0.0
    cuda_time_total: float = 0.0
    self_cuda_time_total: float = 0.0
    events: list = field(default_factory=list, repr=False)

    def add(self, event: FunctionEvent) -> None:
        self.count += 1
        self.cpu_time_total += event.cpu_time_total
        self.self_cpu_time_total += event.self_cpu_time_total
        self.cuda_time_total += event.cuda_time_total
        self.self_cuda_time_total += event.self_cuda_time_total
        self.events.append(event)

    @property
    def cpu_time(self) -> float:
        """Average CPU time per call, in microseconds."""
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def cuda_time(self) -> float:
        return self.cuda_time_total / self.count if self.count else 0.0


def row_name(name: str) -> str:
    """The row an event adds to: its name, except that every step is one row "ProfilerStep*"."""
    return "ProfilerStep*" if name.startswith("ProfilerStep#") else name


def shapes_text(shapes: list) -> str:
    return "[" + ", ".join("[" + ", ".join(str(n) for n in s) + "]" for s in shapes) + "]"


class EventList(list):
    """A list of :class:`FunctionEvent` (``prof.events()``) with PyTorch's summaries."""

    def key_averages(self, group_by_input_shape: bool = False) -> "KeyAverages":
        if not isinstance(group_by_input_shape, bool):
            raise TypeError(f"group_by_input_shape takes True or False, got {group_by_input_shape!r}")
        rows: dict[tuple, FunctionEventAvg] = {}
        for event in self:
            shapes = shapes_text(event.input_shapes) if group_by_input_shape else ""
            name = row_name(event.name)
            key = (name, shapes, event.device_type)
            if key not in rows:
                rows[key] = FunctionEventAvg(name, shapes, event.device_type)
            rows[key].add(event)
        return KeyAverages(rows.values(), group_by_input_shape)

    def table(self, sort_by: str | None = None, row_limit: int = 100) -> str:
        return self.key_averages().table(sort_by=sort_by, row_limit=row_limit)

    def self_cpu_time_total(self) -> float:
        return sum(e.self_cpu_time_total for e in self)


class KeyAverages(list):
    """The rows of ``key_averages()``; ``.table()`` prints them as PyTorch does."""

    def __init__(self, rows, with_shapes: bool = False) -> None:
        super().__init__(rows)
        self.with_shapes = with_shapes

    def table(self, sort_by: str | None = None, row_limit: int = 100,
              max_name_column_width: int = 55) -> str:
        check_table_arguments(sort_by, row_limit, max_name_column_width)
        from .table import format_table

        rows = list(self)
        if sort_by is not None:
            rows.sort(key=lambda r: getattr(r, sort_by), reverse=True)
        if row_limit > 0:
            rows = rows[:row_limit]
        return format_table(rows, list(self), self.with_shapes, max_name_column_width)


def check_table_arguments(sort_by: object, row_limit: object, width: object) -> None:
    if sort_by is not None and sort_by not in SORT_KEYS:
        raise ValueError(f"table(sort_by={sort_by!r}): sort by one of {', '.join(SORT_KEYS)} "
                         "(or None to keep the order the ops first ran in)")
    if type(row_limit) is not int:
        raise TypeError(f"table(row_limit=...) takes an int (<= 0: every row), got {row_limit!r}")
    if type(width) is not int or width < 10:
        raise ValueError(f"max_name_column_width must be an int of at least 10, got {width!r}")
