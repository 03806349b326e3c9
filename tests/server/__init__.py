"""Tests of `kafkactor.server`: one broker process and its configuration."""
