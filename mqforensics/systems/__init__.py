"""One package per mail system; everything specific to a system lives in its package."""
