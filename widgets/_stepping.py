"""Back / next buttons and a slider over the steps of a recording, for the stepping views."""
from __future__ import annotations

import ipywidgets as widgets


class StepControls:
    """Mixin: ``step_slider`` over steps ``0 .. last``, moved by ``back_button`` and
    ``next_button``; every move calls the view's ``_draw()``."""

    def _step_controls(self, last: int, description: str = "step") -> list[widgets.Widget]:
        """Make the three controls (wired to ``_draw``) and return them, for a row."""
        self.back_button = widgets.Button(description="back", icon="step-backward")
        self.next_button = widgets.Button(description="next", icon="step-forward")
        self.step_slider = widgets.IntSlider(0, 0, last, description=description)
        self.back_button.on_click(lambda b: self._move(-1))
        self.next_button.on_click(lambda b: self._move(+1))
        self.step_slider.observe(lambda change: self._draw(), names="value")
        return [self.back_button, self.next_button, self.step_slider]

    @property
    def step(self) -> int:
        return self.step_slider.value

    def _move(self, delta: int) -> None:
        self.step_slider.value = max(0, min(self.step_slider.max, self.step + delta))

    def _disable_ends(self) -> None:
        """No going back from the first step, nor on from the last."""
        self.back_button.disabled = self.step == 0
        self.next_button.disabled = self.step == self.step_slider.max

    def _draw(self) -> None:  # pragma: no cover - every view defines its own
        raise NotImplementedError
