"""Prometheus metrics for operators: what a node served, and how busy its engines are."""
