"""Rendering only: Rich tables, JSON and self-contained HTML (layer 4)."""
