"""Writers that turn the pair builder's records into training-framework files (design §5)."""
