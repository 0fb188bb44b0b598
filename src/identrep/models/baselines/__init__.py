"""Baseline models from the papers Chen et al. (2024) compare against."""
