"""The ground layer: imports nothing else of skyward. The wire (messages, codec, handshake,
peers, private directories) and the vocabulary every layer shares (validation, errors,
accelerators, instance, PendingFunction, ...)."""
