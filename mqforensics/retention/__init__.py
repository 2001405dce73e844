"""Retention: policies say why data may go, plans say exactly what, approval says who agreed.

The planner (per system) turns a policy and a read of the store into a plan directory; nothing is
deleted until someone has read the plan's report and approved its hash (see docs/retention.md).
"""
