"""fnx.export: programs that run without their Python source."""
