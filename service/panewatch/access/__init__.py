"""Who may talk to the service, and through which door: the token and logins (``auth``,
``login``), paired devices (``devices``), the HTTP and connection guards (``http_guard``,
``conn_guard``), the hook-report endpoints (``report_socket``, ``reports``; a caller named by the
kernel, ``identity``), the state folder and its lock (``statedir``, ``statelock``), and the input
refused at the door (``validation``)."""
