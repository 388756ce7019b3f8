"""What a pane is and how it is read: its screen, signals and decision (``pane``), when it is
read (``scheduler``), the fixed order of signals (``signals``), and what a blocked prompt offers
(``prompts``) and asks (``asks``). Pure: no I/O, the clock injected."""
