"""The box-local shortcut of a pointwise-then-resize chain (:class:`BoxLocal`): only a
burned text's box changes, so its change is passed through the pointwise part on the box
alone and through the resize as two separable matrices, then added to the clean input."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from monai_forget.memorisation.preprocessing import Preprocessing, as_array

__all__ = ["BoxLocal", "scatter"]

#: Transforms after the resize that leave values alone (type and device conversions).
_VALUE_PRESERVING = ("EnsureType", "EnsureTyped", "CastToType", "CastToTyped", "ToTensor",
                     "ToTensord", "ToNumpy", "ToNumpyd", "Identity", "Identityd")  # fmt: skip
_RESIZES = ("Resize", "Resized")


class BoxLocal:
    """The box-local shortcut for ``pointwise prefix -> resize -> value-preserving suffix``.

    ``model input(x burned) = model input(x) + R(P(x burned) - P(x))`` where ``P`` is the
    prefix (applied to the box alone: pointwise) and ``R`` the resize, linear and
    separable: ``R(D) = A_r D A_c^T`` with ``A_r`` (h x H) and ``A_c`` (w x W) read off the
    resize by passing indicator rows and columns through it. Exact for such chains; the
    caller checks it against the whole chain before trusting it.
    """

    def __init__(self, preprocessing: Preprocessing) -> None:
        from monai.transforms import Compose

        transform = preprocessing.transform
        chain = list(getattr(transform, "transforms", [transform]))
        names = [type(t).__name__ for t in chain]
        resizes = [i for i, n in enumerate(names) if n in _RESIZES]
        if not resizes or any(n not in _VALUE_PRESERVING for n in names[resizes[-1] + 1 :]):
            raise ValueError("not a chain that ends in a resize")
        self.key = preprocessing.key
        self.prefix = Compose(chain[: resizes[-1]])
        self.resize = chain[resizes[-1]]
        self._matrices: dict[tuple[int, int, int], dict[int, np.ndarray]] = {}

    def _apply(self, transform: Callable, image: np.ndarray) -> np.ndarray:
        if self.key is None:
            return as_array(transform(image))
        return as_array(transform({self.key: image})[self.key])

    def weights(self, shape: tuple[int, int], axis: int, indices: range) -> np.ndarray:
        """Columns ``indices`` of ``A_r`` (``axis`` 0) or ``A_c`` (1) for acquisition images
        of ``shape``: column r of ``A_r`` is the resize of an image whose row r is 1 (the
        resize is separable and ``A_c``'s rows sum to 1), likewise for ``A_c``; computed
        once per index."""
        known = self._matrices.setdefault((*shape, axis), {})
        missing = [i for i in indices if i not in known]
        rows, cols = shape
        for start in range(0, len(missing), 16):
            chunk = missing[start : start + 16]
            basis = np.zeros((len(chunk), rows, cols), np.float32)
            for k, index in enumerate(chunk):
                (basis[k, index, :] if axis == 0 else basis[k, :, index])[...] = 1.0
            out = self._apply(self.resize, basis)  # channels: a batch of indicators
            for k, index in enumerate(chunk):
                known[index] = (out[k, :, 0] if axis == 0 else out[k, 0, :]).astype(np.float64)
        return np.stack([known[i] for i in indices], axis=1)

    def carrying(
        self, images: Sequence[np.ndarray], clean: np.ndarray, burned_boxes: np.ndarray,
        clean_boxes: np.ndarray, box: tuple[int, int, int, int],
    ) -> np.ndarray:  # fmt: skip
        """Model inputs ``(G, N, C, h, w)`` of the probes whose ``box`` (row, col, height,
        width) holds ``burned_boxes[g]`` ``(N, C, bh, bw)`` instead of ``clean_boxes``."""
        row, col, height, width = box
        groups, n = burned_boxes.shape[:2]
        # P on every box side by side (pointwise, so one call serves every probe and text)
        wide = np.concatenate([burned_boxes.reshape(-1, *clean_boxes.shape[1:]), clean_boxes])
        wide = wide.transpose(1, 2, 0, 3).reshape(wide.shape[1], height, -1)
        mapped = self._apply(self.prefix, wide).reshape(-1, height, (groups + 1) * n, width)
        mapped = mapped.transpose(2, 0, 1, 3)  # (boxes, C, bh, bw)
        delta = mapped[: groups * n].reshape(groups, n, *mapped.shape[1:]) - mapped[groups * n :]
        out = np.repeat(clean[None], groups, axis=0)
        for shape in {x.shape[-2:] for x in images}:
            r = self.weights(shape, 0, range(row, row + height))
            c = self.weights(shape, 1, range(col, col + width))
            out_rows = np.flatnonzero(np.abs(r).sum(axis=1))
            out_cols = np.flatnonzero(np.abs(c).sum(axis=1))
            which = [i for i, x in enumerate(images) if x.shape[-2:] == shape]
            change = np.einsum(
                "hr,gncrw,vw->gnchv", r[out_rows], delta[:, which], c[out_cols], optimize=True
            )
            block = np.ix_(range(groups), which, range(out.shape[2]), out_rows, out_cols)
            out[block] += change.astype(np.float32)
        return out


def scatter(change: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``change`` over the footprint ``rows x cols`` placed in their bounding block."""
    if rows[-1] - rows[0] + 1 == len(rows) and cols[-1] - cols[0] + 1 == len(cols):
        return change
    block = np.zeros(
        (*change.shape[:3], rows[-1] - rows[0] + 1, cols[-1] - cols[0] + 1), change.dtype
    )
    block[..., (rows - rows[0])[:, None], (cols - cols[0])[None, :]] = change
    return block
