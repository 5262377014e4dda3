"""The HTTP API of design §3: Powertools REST resolver (``app``), use cases (``service``), auth, errors."""
