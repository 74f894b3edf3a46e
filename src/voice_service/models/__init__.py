"""Models an operator pulls from the Hugging Face Hub beside the packaged ones: the catalogue
(catalogue.toml), and the models dir that holds what was pulled, checked file by file."""
