"""The environment: desktops, providers, the warm pool, actions, screenshots, streaming tokens."""
