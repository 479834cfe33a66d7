"""Record payload decoding: the Confluent wire format and one decoder per schema type.

A :class:`~table_topic.decode.base.PayloadDecoder` turns payload bytes into
Python values of one Arrow type; :class:`~table_topic.decode.resolver.SchemaResolver`
finds the decoder for a schema id or a subject's latest version through the
built-in registry.
"""

from table_topic.decode.base import PayloadDecoder, split_wire_format
from table_topic.decode.resolver import SchemaResolver

__all__ = ["PayloadDecoder", "SchemaResolver", "split_wire_format"]
