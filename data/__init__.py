"""Conversation schema, file formats and benchmark loaders."""

from .io import SchemaError, read_conversations, write_conversations
from .schema import Claim, Conversation, Turn

__all__ = ["Claim", "Conversation", "SchemaError", "Turn", "read_conversations", "write_conversations"]
