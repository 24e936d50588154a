"""The toolwire server (``pip install 'toolwire[server]'``): AI SDK chat, native events, web page."""

from toolwire.server._input import Limits
from toolwire.server.app import create_app, serve
from toolwire.server.hub import EventHub

__all__ = ["EventHub", "Limits", "create_app", "serve"]
