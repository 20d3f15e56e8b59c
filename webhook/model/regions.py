"""Cloud region -> grid zone: which Electricity Maps zone powers a cloud region.

The table is reviewed data, not derived from any one source: Electricity Maps'
``data_centers.json`` has a few evident errors (azure ``southeastasia`` -> DK-DK2, gcp
``us-west2`` -> US-SW-SRP, gcp ``northamerica-northeast2`` -> US-MIDA-PJM, azure
``israelcentral`` -> JO, azure ``japaneast`` -> JP-TH); the entries below use the zone
where the region physically is (SG, US-CAL-CISO, CA-ON, IL, JP-TK). Config ``clusters``
and an explicit ``zone`` always win over this table.
"""

from __future__ import annotations

from collections.abc import Mapping

AWS: Mapping[str, str] = {
    "us-east-1": "US-MIDA-PJM",
    "us-east-2": "US-MIDA-PJM",
    "us-west-1": "US-CAL-CISO",
    "us-west-2": "US-NW-PACW",
    "ca-central-1": "CA-QC",
    "ca-west-1": "CA-AB",
    "sa-east-1": "BR-CS",
    "mx-central-1": "MX",
    "eu-west-1": "IE",
    "eu-west-2": "GB",
    "eu-west-3": "FR",
    "eu-central-1": "DE",
    "eu-central-2": "CH",
    "eu-north-1": "SE-SE3",
    "eu-south-1": "IT-NO",
    "eu-south-2": "ES",
    "me-central-1": "AE",
    "il-central-1": "IL",
    "af-south-1": "ZA",
    "ap-northeast-1": "JP-TK",
    "ap-northeast-2": "KR",
    "ap-northeast-3": "JP-KN",
    "ap-southeast-1": "SG",
    "ap-southeast-2": "AU-NSW",
    "ap-southeast-3": "ID",
    "ap-southeast-4": "AU-VIC",
    "ap-east-1": "HK",
    "ap-south-1": "IN-WE",
    "ap-south-2": "IN-SO",
}

GCP: Mapping[str, str] = {
    "us-central1": "US-CENT-SWPP",
    "us-east1": "US-CAR-SCEG",
    "us-east4": "US-MIDA-PJM",
    "us-east5": "US-MIDA-PJM",
    "us-south1": "US-TEX-ERCO",
    "us-west1": "US-NW-PACW",
    "us-west2": "US-CAL-CISO",
    "us-west3": "US-NW-PACE",
    "us-west4": "US-NW-NEVP",
    "northamerica-northeast1": "CA-QC",
    "northamerica-northeast2": "CA-ON",
    "southamerica-east1": "BR-CS",
    "southamerica-west1": "CL-SEN",
    "europe-west1": "BE",
    "europe-west2": "GB",
    "europe-west3": "DE",
    "europe-west4": "NL",
    "europe-west6": "CH",
    "europe-west8": "IT-NO",
    "europe-west9": "FR",
    "europe-north1": "FI",
    "europe-north2": "SE-SE3",
    "europe-central2": "PL",
    "europe-southwest1": "ES",
    "asia-east1": "TW",
    "asia-east2": "HK",
    "asia-northeast1": "JP-TK",
    "asia-northeast2": "JP-KN",
    "asia-northeast3": "KR",
    "asia-south1": "IN-WE",
    "asia-south2": "IN-NO",
    "asia-southeast1": "SG",
    "asia-southeast2": "ID",
    "australia-southeast1": "AU-NSW",
    "australia-southeast2": "AU-VIC",
    "africa-south1": "ZA",
    "me-west1": "IL",
}

AZURE: Mapping[str, str] = {
    "eastus": "US-MIDA-PJM",
    "eastus2": "US-MIDA-PJM",
    "centralus": "US-MIDW-MISO",
    "northcentralus": "US-MIDW-MISO",
    "southcentralus": "US-TEX-ERCO",
    "westus": "US-CAL-CISO",
    "westus2": "US-NW-BPAT",
    "westus3": "US-SW-AZPS",
    "westcentralus": "US-NW-PACE",
    "canadacentral": "CA-ON",
    "canadaeast": "CA-QC",
    "brazilsouth": "BR-CS",
    "northeurope": "IE",
    "westeurope": "NL",
    "uksouth": "GB",
    "ukwest": "GB",
    "francecentral": "FR",
    "germanywestcentral": "DE",
    "swedencentral": "SE-SE3",
    "norwayeast": "NO-NO1",
    "switzerlandnorth": "CH",
    "polandcentral": "PL",
    "italynorth": "IT-NO",
    "spaincentral": "ES",
    "japanwest": "JP-KN",
    "japaneast": "JP-TK",
    "koreacentral": "KR",
    "centralindia": "IN-WE",
    "southindia": "IN-SO",
    "eastasia": "HK",
    "southeastasia": "SG",
    "australiaeast": "AU-NSW",
    "australiacentral": "AU-NSW",
    "australiasoutheast": "AU-VIC",
    "southafricanorth": "ZA",
    "uaenorth": "AE",
    "qatarcentral": "QA",
    "israelcentral": "IL",
    "mexicocentral": "MX",
    "newzealandnorth": "NZ",
    "indonesiacentral": "ID",
}

BY_PROVIDER: Mapping[str, Mapping[str, str]] = {
    "aws": AWS,
    "gcp": GCP,
    "google": GCP,
    "azure": AZURE,
}


def zone_for_region(provider: str | None, region: str | None) -> str | None:
    """The grid zone of a cloud region, or None when the table does not know it.

    With no provider, the region is looked up in every table (region names do not
    collide between AWS, GCP and Azure).
    """
    if not region:
        return None
    region = region.strip().lower()
    if provider:
        table = BY_PROVIDER.get(provider.strip().lower())
        return table.get(region) if table else None
    for table in (AWS, GCP, AZURE):
        if region in table:
            return table[region]
    return None


COUNTRIES: Mapping[str, str] = {
    "australia": "AU",
    "belgium": "BE",
    "brazil": "BR",
    "britain": "GB",
    "canada": "CA",
    "chile": "CL",
    "finland": "FI",
    "france": "FR",
    "germany": "DE",
    "greatbritain": "GB",
    "hongkong": "HK",
    "india": "IN",
    "indonesia": "ID",
    "ireland": "IE",
    "israel": "IL",
    "italy": "IT",
    "japan": "JP",
    "korea": "KR",
    "mexico": "MX",
    "netherlands": "NL",
    "newzealand": "NZ",
    "norway": "NO",
    "poland": "PL",
    "qatar": "QA",
    "singapore": "SG",
    "southafrica": "ZA",
    "southkorea": "KR",
    "spain": "ES",
    "sweden": "SE",
    "switzerland": "CH",
    "taiwan": "TW",
    "uae": "AE",
    "unitedarabemirates": "AE",
    "unitedkingdom": "GB",
    "unitedstates": "US",
    "usa": "US",
}
"""Country names (lower case, without spaces) -> ISO 3166 code, for the countries the
tables above hold cloud regions in: what a zone key mistaken for a country's name is
pointed to (:func:`country_zones`)."""


def country_zones(name: str) -> tuple[str, ...]:
    """The grid zones of the tables above in the country ``name`` (``France``: FR;
    ``Japan``: JP-KN, JP-TK), empty when ``name`` is no country the table knows."""
    code = COUNTRIES.get("".join(name.lower().split()).replace("-", "").replace("_", ""))
    if code is None:
        return ()
    zones = {z for table in (AWS, GCP, AZURE) for z in table.values()}
    return tuple(sorted(z for z in zones if z == code or z.startswith(f"{code}-")))
