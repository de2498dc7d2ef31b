"""Sunway scheduling passes: tile search, LDM layout, DMA footprints, loop order, SIMD, CPE split."""
