"""`fnx.utils.tensorboard.SummaryWriter`: PyTorch's TensorBoard logger, writing through the `tensorboard` package.

The events are the ones `torch.utils.tensorboard` writes (the same summaries, tags, histogram buckets and
folder layout), so TensorBoard shows fnx runs as it shows PyTorch's. Values may be fnx tensors (detached and
read on the host), numpy arrays or Python numbers. `tensorboard` is an optional dependency: without it,
importing this module raises an ImportError that says how to install it.
"""
from __future__ import annotations

import os
import socket
import time
from datetime import datetime

import numpy as np

from ..tensor import Tensor

try:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
    from tensorboard.compat.proto.tensor_pb2 import TensorProto
    from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
    from tensorboard.plugins.text.plugin_data_pb2 import TextPluginData
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
except ImportError as e:
    raise ImportError("fnx.utils.tensorboard writes through the `tensorboard` package, which is not installed: "
                      "pip install tensorboard") from e

__all__ = ["SummaryWriter"]


def _tensorflow_bins() -> list[float]:
    """TensorBoard's default histogram buckets: +-1e-12 growing by 10% up to 1e20, and 0."""
    edges, v = [], 1e-12
    while v < 1e20:
        edges.append(v)
        v *= 1.1
    return [-e for e in reversed(edges)] + [0.0] + edges


_TENSORFLOW_BINS = _tensorflow_bins()


def _numpy(values) -> np.ndarray:
    if isinstance(values, Tensor):
        values = values.detach().cpu().double().numpy() if values.dtype.is_floating_point else values.cpu().numpy()
    return np.asarray(values)


def _scalar(value) -> float:
    arr = _numpy(value)
    if arr.size != 1:
        raise ValueError(f"SummaryWriter: a scalar must hold one value, got shape {list(arr.shape)}")
    return float(arr.reshape(()))


def _histogram(values, bins, max_bins: int | None) -> HistogramProto:
    """TensorBoard's histogram of `values`: the buckets that hold data, with one empty bucket to their left."""
    values = _numpy(values).astype(np.float64).reshape(-1)
    if values.size == 0:
        raise ValueError("SummaryWriter.add_histogram: the values are empty")
    counts, limits = np.histogram(values, bins=_TENSORFLOW_BINS if bins == "tensorflow" else bins)
    if max_bins is not None and len(counts) > max_bins:
        group = len(counts) // max_bins
        counts = np.pad(counts, (0, -len(counts) % group)).reshape(-1, group).sum(axis=1)
        limits = np.append(limits[:-1:group], limits[-1])
    filled = np.flatnonzero(counts)
    first, last = filled[0], filled[-1]
    counts = counts[first - 1:last + 1] if first > 0 else np.concatenate([[0], counts[:last + 1]])
    return HistogramProto(min=values.min(), max=values.max(), num=values.size, sum=values.sum(),
                          sum_squares=values.dot(values), bucket_limit=limits[first:last + 2].tolist(),
                          bucket=counts.tolist())


class SummaryWriter:
    """Writes TensorBoard event files into `log_dir` (default `runs/<date>_<host><comment>`), as
    `torch.utils.tensorboard.SummaryWriter`; a context manager that closes on exit."""

    def __init__(self, log_dir: str | None = None, comment: str = "", purge_step: int | None = None,
                 max_queue: int = 10, flush_secs: int = 120, filename_suffix: str = ""):
        if log_dir is None:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = os.fspath(log_dir)
        self.max_queue, self.flush_secs, self.filename_suffix = max_queue, flush_secs, filename_suffix
        self._writers: dict[str, EventFileWriter] = {}
        self._purge_step = purge_step
        self._writer(self.log_dir)  # the folder and its event file exist from the start, as in PyTorch

    def get_logdir(self) -> str:
        return self.log_dir

    def _writer(self, log_dir: str) -> EventFileWriter:
        writer = self._writers.get(log_dir)
        if writer is None:
            writer = self._writers[log_dir] = EventFileWriter(log_dir, self.max_queue, self.flush_secs,
                                                              self.filename_suffix)
            if self._purge_step is not None and log_dir == self.log_dir:
                writer.add_event(Event(step=self._purge_step, file_version="brain.Event:2"))
                writer.add_event(Event(step=self._purge_step, session_log={"status": 1}))  # START: drop later steps
        return writer

    def _add(self, summary: Summary, global_step, walltime, log_dir: str | None = None) -> None:
        event = Event(summary=summary, wall_time=time.time() if walltime is None else walltime)
        if global_step is not None:
            event.step = int(global_step)
        self._writer(self.log_dir if log_dir is None else log_dir).add_event(event)

    def add_scalar(self, tag: str, scalar_value, global_step=None, walltime=None, new_style: bool = False,
                   double_precision: bool = False) -> None:
        """Log one number (a Python number, a one-element tensor or array) under `tag`."""
        value = _scalar(scalar_value)
        if new_style:
            tensor = (TensorProto(double_val=[value], dtype="DT_DOUBLE") if double_precision
                      else TensorProto(float_val=[value], dtype="DT_FLOAT"))
            metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
            summary = Summary(value=[Summary.Value(tag=tag, tensor=tensor, metadata=metadata)])
        else:
            summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
        self._add(summary, global_step, walltime)

    def add_scalars(self, main_tag: str, tag_scalar_dict: dict, global_step=None, walltime=None) -> None:
        """Log several numbers on one chart: each goes to its own run folder `<log_dir>/<main_tag>_<tag>`."""
        walltime = time.time() if walltime is None else walltime
        for tag, value in tag_scalar_dict.items():
            folder = os.path.join(self.log_dir, f"{main_tag.replace('/', '_')}_{tag}")
            self._add(Summary(value=[Summary.Value(tag=main_tag, simple_value=_scalar(value))]), global_step,
                      walltime, folder)

    def add_histogram(self, tag: str, values, global_step=None, bins="tensorflow", walltime=None,
                      max_bins: int | None = None) -> None:
        """Log the distribution of `values`; `bins` is "tensorflow" (TensorBoard's buckets) or what np.histogram
        takes."""
        self._add(Summary(value=[Summary.Value(tag=tag, histo=_histogram(values, bins, max_bins))]), global_step,
                  walltime)

    def add_text(self, tag: str, text_string: str, global_step=None, walltime=None) -> None:
        """Log a string (markdown) under `tag`, shown in TensorBoard's text tab."""
        plugin = SummaryMetadata.PluginData(plugin_name="text", content=TextPluginData(version=0).SerializeToString())
        tensor = TensorProto(dtype="DT_STRING", string_val=[text_string.encode("utf-8")],
                             tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]))
        value = Summary.Value(tag=tag + "/text_summary", metadata=SummaryMetadata(plugin_data=plugin), tensor=tensor)
        self._add(Summary(value=[value]), global_step, walltime)

    def flush(self) -> None:
        """Write pending events to disk."""
        for writer in self._writers.values():
            writer.flush()

    def close(self) -> None:
        """Flush and close every event file; a later add_* opens new ones."""
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()

    def __getattr__(self, name: str):
        if name.startswith("add_"):  # add_image, add_graph, add_embedding, ...: PyTorch's other summaries
            raise NotImplementedError(f"SummaryWriter.{name} is not implemented in fnx; fnx's SummaryWriter has "
                                      f"add_scalar, add_scalars, add_histogram and add_text")
        raise AttributeError(f"'SummaryWriter' object has no attribute {name!r}")

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
