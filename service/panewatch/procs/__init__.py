"""An agent's process: its command (the wrappers in front, ``wrappers``; the resumed command,
``resume``; the sandbox around it, ``sandbox``), its terminal (``ptyproc``, ``outbox``), what
holds that terminal (``procinfo``), and its whole tree ending with it (``proctree``)."""
