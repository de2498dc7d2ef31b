"""The Sunway printers: MPE host code, CPE slave code, the Athread/CRTS spellings, C SCoPs."""
