"""The names the Metal backend uses, said once."""

#: The library every Metal device reports (the seed's "Metal").
LIBRARY = "Metal"
