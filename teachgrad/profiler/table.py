"""The text table of ``key_averages().table()``, laid out as PyTorch lays out its own.

Columns: Name, Self CPU %, Self CPU, CPU total %, CPU total, CPU time avg, then (when
any device time was recorded) Self CUDA, Self CUDA %, CUDA total, CUDA time avg, then
# of Calls, and Input Shapes when the rows were grouped by them.
"""
from __future__ import annotations


def format_time(us: float) -> str:
    """``12.345us``, ``1.234ms`` or ``2.500s``, as PyTorch writes times."""
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _percent(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.2f}%" if whole > 0 else "0.00%"


def format_table(rows: list, all_rows: list, with_shapes: bool, name_width: int) -> str:
    """``rows`` (sorted, cut) as text; percentages are of the totals over ``all_rows``."""
    self_cpu = sum(r.self_cpu_time_total for r in all_rows)
    # device time is counted once, on the kernels' and copies' own rows (an op's self CUDA
    # time is the same time again, seen from the op that enqueued them)
    self_cuda = sum(r.self_cuda_time_total for r in all_rows if r.device_type != "cpu")
    with_cuda = any(r.cuda_time_total > 0 or r.device_type != "cpu" for r in all_rows)

    headers = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if with_cuda:
        headers += ["Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"]
    headers += ["# of Calls"]

    def cells(r) -> list[str]:
        out = [_percent(r.self_cpu_time_total, self_cpu), format_time(r.self_cpu_time_total),
               _percent(r.cpu_time_total, self_cpu), format_time(r.cpu_time_total),
               format_time(r.cpu_time)]
        if with_cuda:
            out += [format_time(r.self_cuda_time_total), _percent(r.self_cuda_time_total, self_cuda),
                    format_time(r.cuda_time_total), format_time(r.cuda_time)]
        return out + [str(r.count)]

    def name(r) -> str:
        return r.key if len(r.key) <= name_width else r.key[:name_width - 3] + "..."

    widths = [max(12, len(h)) for h in headers]
    name_w = max([len("Name")] + [len(name(r)) for r in rows])
    shapes_w = max([len("Input Shapes")] + [len(r.input_shapes) for r in rows]) if with_shapes else 0
    rule = "  ".join(["-" * name_w] + ["-" * w for w in widths]
                     + (["-" * shapes_w] if with_shapes else []))

    def line(first: str, values: list[str], shapes: str | None) -> str:
        parts = [first.rjust(name_w)] + [v.rjust(w) for v, w in zip(values, widths)]
        if shapes is not None:
            parts.append(shapes.ljust(shapes_w))
        return "  ".join(parts).rstrip()

    out = [rule, line("Name", headers, "Input Shapes" if with_shapes else None), rule]
    out += [line(name(r), cells(r), r.input_shapes if with_shapes else None) for r in rows]
    out += [rule, f"Self CPU time total: {format_time(self_cpu)}"]
    if with_cuda:
        out.append(f"Self CUDA time total: {format_time(self_cuda)}")
    return "\n".join(out) + "\n"
