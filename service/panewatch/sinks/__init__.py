"""Sinks of the engine's typed events: notifications (``notify``) and Web Push (``push``),
recordings (``transcript``), the ledger of decisions (``ledger``), ``/metrics`` (``metrics``,
``answer_figures``). Each subscribes to the one hub; none writes to a pane."""
