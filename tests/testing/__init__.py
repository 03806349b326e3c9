"""Tests of kafkactor.testing: the nemesis schedules, its verdict, its runs and its command."""
