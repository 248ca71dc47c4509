"""Tree families: cost-sensitive CART, AFR, stagewise boosting, LightGBM import and tree sequencing."""
