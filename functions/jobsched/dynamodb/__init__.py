"""Storage adapters: DynamoDB item layouts (``layout``) and the stores behind small interfaces."""
