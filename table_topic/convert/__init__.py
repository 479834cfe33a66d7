"""Kafka records to Arrow: conversion of one partition's chunk, and conforming to a table schema."""

from table_topic.convert.chunk import ConvertedChunk, DeadLetter, convert_batches
from table_topic.convert.conform import conform_table

__all__ = ["ConvertedChunk", "DeadLetter", "conform_table", "convert_batches"]
