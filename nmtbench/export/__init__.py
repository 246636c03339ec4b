"""Trained runs exported to the Hugging Face format, with a tokenizer over both vocabularies."""
