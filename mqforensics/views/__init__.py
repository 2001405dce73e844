"""Renderings only: plots, the tables they draw, widgets, reports, progress, notebook export and
what a notebook audits. No check or plan logic lives here."""
