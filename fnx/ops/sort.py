"""(being written)"""
__all__: list = []
METHODS: dict = {}
INPLACE: dict = {}
