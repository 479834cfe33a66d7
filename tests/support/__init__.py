"""Helpers shared by the integration and e2e tiers (processes, ports)."""
