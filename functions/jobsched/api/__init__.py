"""The HTTP API of SPEC section 3: Powertools REST resolver (``app``), use cases (``service``), auth, errors."""
