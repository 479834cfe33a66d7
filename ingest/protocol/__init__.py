"""ingest/protocol"""
