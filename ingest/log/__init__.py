"""ingest/log"""
